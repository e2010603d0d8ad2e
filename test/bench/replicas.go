package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/operator-framework/oria/internal/firstpass"
	"github.com/operator-framework/oria/test/localcluster"
	"github.com/operator-framework/oria/test/oriaproc"
)

// pollEvery is how often the restart scenario reads oria's log for the
// moment it leads and the moment its first full pass is done. The log, not
// /metrics: a scrape of oria's /metrics counts the objects in its cache
// (oria_managed_objects), and scraping every 50 ms at 100,000 bindings
// cost oria 10 % of its CPU during a restart.
const pollEvery = 50 * time.Millisecond

// What oria's log says: when it leads (client-go's leader election) and
// when its first full pass is done for every kind (internal/firstpass).
const (
	leadingMarker = "Successfully acquired lease"
	doneMarker    = firstpass.AllMessage
)

// launchOria starts oria as execute did (the same flags, then extra ones,
// which win), logging to logName in the output folder, without waiting
// for it to be ready.
func (b *bench) launchOria(logName string, extra ...string) (*oriaProcess, error) {
	args := append(slices.Clone(b.oriaFlags), extra...)
	proc, err := oriaproc.Launch(b.cfg.oriaBin, b.cluster.Kubeconfig, filepath.Join(b.cfg.outDir, logName), args...)
	if err != nil {
		return nil, fmt.Errorf("starting oria: %w", err)
	}
	return wrapOria(proc, b.cfg), nil
}

// replicaFlags are the flags of one of two replicas: leader election (the
// Lease in kube-system, as outside a cluster) and the escalation guard on
// a port of its own, behind the proxy.
func replicaFlags(webhookPort int) []string {
	return []string{"--leader-elect", "--leader-election-namespace=" + leaderElectionNamespace, "--webhook-port=" + strconv.Itoa(webhookPort)}
}

// follow makes p the process the benchmark measures (metrics, settling,
// memory), keeping the run's overall peak memory.
func (b *bench) follow(ctx context.Context, p *oriaProcess) {
	peak := b.mem.overallPeak()
	b.oria = p
	b.mem = newSampler(ctx, p.Pid(), 100*time.Millisecond)
	b.mem.observe(peak)
	b.mem.begin()
}

// passSeconds scrapes p once for oria_first_pass_seconds: the longest
// first pass of a kind, from the moment p started leading.
func passSeconds(ctx context.Context, p *oriaProcess) (float64, error) {
	f, err := p.metrics.families(ctx, firstpass.SecondsMetric)
	if err != nil {
		return 0, err
	}
	var s float64
	for _, x := range f[0] {
		s = max(s, x.Value)
	}
	return s, nil
}

// waitLog reads p's log every pollEvery until it holds marker, and returns
// when it first did, or an error after timeout or when p exits.
func waitLog(ctx context.Context, p *oriaProcess, timeout time.Duration, what, marker string) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(p.LogPath); err == nil && bytes.Contains(b, []byte(marker)) {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-p.Done():
			return time.Time{}, fmt.Errorf("oria exited while waiting for %s; see %s", what, p.LogPath)
		case <-time.After(pollEvery):
		}
	}
	return time.Time{}, fmt.Errorf("%s: not within %s; see %s", what, timeout, p.LogPath)
}

// engineWrites returns p's oria_writes_total: the RBAC objects (and
// compiled objects) its write engine wrote since it started.
func engineWrites(ctx context.Context, p *oriaProcess) (int, error) {
	f, err := p.metrics.families(ctx, "oria_writes_total")
	if err != nil {
		return 0, err
	}
	return int(sum(f[0])), nil
}

// proxy forwards TCP connections to the first of its backends that
// accepts one, starting with the next in turn: two oria replicas behind
// the one address the API server calls the escalation guard at, as the
// install's Service puts them (test/install does the same).
type proxy struct {
	l        net.Listener
	backends []string
	mu       sync.Mutex
	next     int
	wg       sync.WaitGroup
}

func startProxy(addr string, backends ...string) (*proxy, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening where the API server calls the guard: %w", err)
	}
	p := &proxy{l: l, backends: backends}
	p.wg.Go(p.serve)
	return p, nil
}

func (p *proxy) serve() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		go p.forward(in)
	}
}

func (p *proxy) forward(in net.Conn) {
	defer in.Close()
	p.mu.Lock()
	first := p.next
	p.next++
	p.mu.Unlock()
	for i := range p.backends {
		out, err := net.DialTimeout("tcp", p.backends[(first+i)%len(p.backends)], time.Second)
		if err != nil {
			continue
		}
		defer out.Close()
		done := make(chan struct{}, 2)
		go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
		go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
		<-done
		return
	}
}

func (p *proxy) close() {
	_ = p.l.Close()
	p.wg.Wait()
}

// replicaSet is two oria replicas with leader election behind a proxy.
type replicaSet struct {
	proxy  *proxy
	ports  [2]int
	procs  [2]*oriaProcess
	leader int // index of the leader in procs
	starts int // replicas started, for log names
}

// startReplicas stops the benchmark's oria, puts a proxy where the API
// server calls the guard, and starts two replicas: the first leads (its
// first full pass done), the second waits, ready.
func (b *bench) startReplicas(ctx context.Context) (*replicaSet, error) {
	w := b.cluster.Webhook
	if w == nil {
		return nil, errors.New("the takeover rows need the escalation guard's webhook")
	}
	ports, err := localcluster.FreePorts(2)
	if err != nil {
		return nil, err
	}
	b.oria.Stop()
	b.leaseRenewals = true
	rs := &replicaSet{ports: [2]int{ports[0], ports[1]}}
	if rs.proxy, err = startProxy(net.JoinHostPort(w.Host, strconv.Itoa(w.Port)),
		"127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1])); err != nil {
		return rs, err // stopReplicas starts the benchmark's oria again
	}
	for i := range 2 {
		if err := b.startReplica(ctx, rs, i); err != nil {
			return rs, err
		}
		if i == 0 {
			if _, err := waitLog(ctx, rs.procs[0], b.cfg.timeout, "the first replica's first full pass", doneMarker); err != nil {
				return rs, err
			}
			b.follow(ctx, rs.procs[0])
		}
	}
	return rs, nil
}

// startReplica starts replica i and waits until it is ready (its caches
// synced, the guard served).
func (b *bench) startReplica(ctx context.Context, rs *replicaSet, i int) error {
	rs.starts++
	p, err := b.launchOria(fmt.Sprintf("oria-replica-%d.log", rs.starts), replicaFlags(rs.ports[i])...)
	if err != nil {
		return err
	}
	rs.procs[i] = p
	return p.WaitReady(ctx, b.cfg.timeout)
}

// stopReplicas stops both replicas and the proxy, and starts the
// benchmark's oria again, as execute did.
func (b *bench) stopReplicas(ctx context.Context, rs *replicaSet) error {
	for _, p := range rs.procs {
		if p != nil {
			p.Stop()
		}
	}
	if rs.proxy != nil {
		rs.proxy.close()
	}
	b.leaseRenewals = false
	p, err := b.launchOria("oria-after-takeover.log")
	if err != nil {
		return err
	}
	b.follow(ctx, p)
	return p.WaitReady(ctx, b.cfg.timeout)
}
