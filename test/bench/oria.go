package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/operator-framework/oria/test/oriaproc"
)

// oriaProcess is the oria binary running against the local control plane,
// with what the benchmark reads from it.
type oriaProcess struct {
	*oriaproc.Process
	metrics   metrics
	outDir    string
	profile   bool
	seconds   int           // length of a CPU profile
	profiling chan struct{} // one CPU profile at a time
}

func startOria(ctx context.Context, cfg *config, kubeconfig, logPath string, args ...string) (*oriaProcess, error) {
	proc, err := oriaproc.Start(ctx, cfg.oriaBin, kubeconfig, logPath, args...)
	if err != nil {
		return nil, err
	}
	return wrapOria(proc, cfg), nil
}

// wrapOria is the benchmark's view of a running oria process.
func wrapOria(proc *oriaproc.Process, cfg *config) *oriaProcess {
	return &oriaProcess{
		Process:   proc,
		metrics:   metrics{url: proc.MetricsURL, client: &http.Client{Timeout: 10 * time.Second}},
		outDir:    cfg.outDir,
		profile:   cfg.profile,
		seconds:   cfg.profileSeconds,
		profiling: make(chan struct{}, 1),
	}
}

// startCPUProfile saves a -profile-seconds CPU profile of the scenario in the
// background (with -profile; skipped while another one runs).
func (p *oriaProcess) startCPUProfile(ctx context.Context, name string) {
	if p.profile {
		goAlone(p.profiling, func() {
			_ = p.saveProfile(ctx, fmt.Sprintf("profile?seconds=%d", p.seconds), name+"-cpu.pb.gz", time.Duration(p.seconds+15)*time.Second)
		})
	}
}

// startCPUProfileAtStart is startCPUProfile for a process just launched:
// it asks until oria's pprof endpoint answers (at most 30 s), so that the
// profile covers its start.
func (p *oriaProcess) startCPUProfileAtStart(ctx context.Context, name string) {
	if !p.profile {
		return
	}
	goAlone(p.profiling, func() {
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !p.Exited(); time.Sleep(20 * time.Millisecond) {
			if err := p.saveProfile(ctx, fmt.Sprintf("profile?seconds=%d", p.seconds), name+"-cpu.pb.gz", time.Duration(p.seconds+15)*time.Second); err == nil {
				return
			}
		}
	})
}

// goAlone runs fn in a goroutine unless another fn holding busy (a channel
// of capacity 1) still runs.
func goAlone(busy chan struct{}, fn func()) {
	select {
	case busy <- struct{}{}:
	default:
		return
	}
	go func() {
		defer func() { <-busy }()
		fn()
	}()
}

// saveHeapProfile saves a heap profile at the end of a scenario (-profile).
func (p *oriaProcess) saveHeapProfile(ctx context.Context, name string) {
	if p.profile {
		_ = p.saveProfile(ctx, "heap", name+"-heap.pb.gz", 30*time.Second)
	}
}

func (p *oriaProcess) saveProfile(ctx context.Context, query, file string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.PprofURL+"/"+query, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("pprof %s: %s", query, resp.Status)
	}
	dir := filepath.Join(p.outDir, "profiles")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, file))
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}
