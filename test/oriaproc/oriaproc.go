// Package oriaproc runs the oria binary as a separate process against a
// cluster, as a user runs it: the end-to-end tests and the benchmark share
// it. Metrics, health probes and pprof listen on free loopback ports.
package oriaproc

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/operator-framework/oria/test/localcluster"
)

// Process is a running oria binary.
type Process struct {
	// Cmd is the running command.
	Cmd *exec.Cmd
	// LogPath holds oria's output.
	LogPath string
	// MetricsURL is the Prometheus endpoint, http://127.0.0.1:<port>/metrics.
	MetricsURL string
	// HealthURL serves /healthz and /readyz.
	HealthURL string
	// PprofURL is the net/http/pprof root, http://127.0.0.1:<port>/debug/pprof.
	PprofURL string

	done chan struct{}
}

// Build returns the path, in dir, of ./cmd/oria of the source tree at
// root, built once per source state and shared by every test package that
// runs oria (see BuildCached).
func Build(root, dir string) (string, error) {
	cached, err := BuildCached(root)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "oria")
	if err := os.Link(cached, bin); err != nil {
		return cached, nil //nolint:nilerr // another file system: use the cached binary itself
	}
	return bin, nil
}

// Start runs bin with KUBECONFIG=kubeconfig and args (after the address
// flags it sets: metrics over plain HTTP on loopback; args may override),
// writing its output to logPath, and waits until /readyz answers 200 (at
// most a minute).
func Start(ctx context.Context, bin, kubeconfig, logPath string, args ...string) (*Process, error) {
	p, err := Launch(bin, kubeconfig, logPath, args...)
	if err != nil {
		return nil, err
	}
	if err := p.WaitReady(ctx, time.Minute); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// Launch is Start without the wait: it returns once oria runs (HealthURL
// is where to ask whether it is ready; args must not move it).
func Launch(bin, kubeconfig, logPath string, args ...string) (*Process, error) {
	ports, err := localcluster.FreePorts(3)
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	p := &Process{
		LogPath:    logPath,
		MetricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0]),
		HealthURL:  fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		PprofURL:   fmt.Sprintf("http://127.0.0.1:%d/debug/pprof", ports[2]),
		done:       make(chan struct{}),
	}
	all := append([]string{
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(ports[0]),
		"--metrics-secure=false", // plain HTTP, on loopback only
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(ports[1]),
		"--pprof-bind-address=127.0.0.1:" + strconv.Itoa(ports[2]),
	}, args...)
	p.Cmd = exec.Command(bin, all...)
	p.Cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	p.Cmd.Stdout, p.Cmd.Stderr = logFile, logFile
	// oria must not outlive its test or benchmark, even when that is killed.
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := p.Cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	go func() { _ = p.Cmd.Wait(); logFile.Close(); close(p.done) }()
	return p, nil
}

// WaitReady waits until /readyz answers 200, at most timeout.
func (p *Process) WaitReady(ctx context.Context, timeout time.Duration) error {
	httpc := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("oria exited during start-up (%v); see %s", p.Cmd.ProcessState, p.LogPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if resp, err := httpc.Get(p.HealthURL + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("oria not ready within %v; see %s", timeout, p.LogPath)
}

// Pid is oria's process id.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Done is closed when oria has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether oria has exited (a nil Process, one that failed
// to start, has).
func (p *Process) Exited() bool {
	if p == nil {
		return true
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM and waits for oria to exit, killing it after 30 s.
func (p *Process) Stop() {
	if p == nil || p.Cmd.Process == nil {
		return
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.Cmd.Process.Kill()
		<-p.done
	}
}
