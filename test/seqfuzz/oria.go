package seqfuzz

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/manager"
	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/localcluster"
	"github.com/operator-framework/oria/test/oriaproc"
)

// leaseFlags are the replicas' leader-election timings (as test/e2e's
// handover test): a leader that dies without releasing the Lease is
// replaced about 4 s later.
var leaseFlags = []string{"--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s", "--leader-election-retry-period=500ms"}

// leaseKey is oria's leader-election Lease.
var leaseKey = client.ObjectKey{Namespace: "kube-system", Name: manager.LeaderElectionID}

// takeoverMax is how long a leader change waits for another replica to
// take the Lease, and Start for a replica to lead.
const takeoverMax = 30 * time.Second

// Oria runs two oria replicas with leader election, as a deployment of two
// would: replica 0 serves the escalation guard the API server calls (the
// webhook address is fixed), replica 1 serves it on a port of its own, as
// a replica behind a Service whose endpoint is elsewhere would. Only the
// leader reconciles; the other runs the standby (it ends closed windows'
// access while no replica leads). Steps stop and start both, or kill the
// leader (LeaderChange).
type Oria struct {
	bin, kubeconfig, dir string
	args                 []string
	admin                client.Client
	replicas             [2]*replica
	// StartedAt is when oria last became ready with a leader.
	StartedAt time.Time
}

// replica is one oria process slot.
type replica struct {
	slot int
	args []string
	p    *oriaproc.Process
	// identity is the Lease holder identity of this process, once it led.
	identity string
}

// newOria prepares the two replicas (started by Start).
func newOria(c *localcluster.Cluster, admin client.Client, bin, dir string) (*Oria, error) {
	o := &Oria{bin: bin, kubeconfig: c.Kubeconfig, dir: dir, admin: admin}
	common := append(append([]string{"--default-rbac-mode=Unmanaged", "--leader-elect", "--leader-election-namespace=" + leaseKey.Namespace}, leaseFlags...), c.OriaFlags()...)
	ports, err := localcluster.FreePorts(1)
	if err != nil {
		return nil, err
	}
	o.replicas[0] = &replica{slot: 0, args: slices.Clone(common)}
	o.replicas[1] = &replica{slot: 1, args: append(slices.Clone(common), fmt.Sprintf("--webhook-port=%d", ports[0]))}
	return o, nil
}

func (r *replica) logPath(dir string) string {
	return filepath.Join(dir, fmt.Sprintf("oria-%d.log", r.slot))
}

func (r *replica) running() bool { return r.p != nil && !r.p.Exited() }

// start starts the replica (its previous log kept as .prev) and waits
// until it is ready.
func (o *Oria) start(ctx context.Context, r *replica) error {
	log := r.logPath(o.dir)
	_ = os.Rename(log, log+".prev")
	p, err := oriaproc.Start(ctx, o.bin, o.kubeconfig, log, r.args...)
	if err != nil {
		testutil.Tail(log, 40)
		return fmt.Errorf("starting oria replica %d: %w", r.slot, err)
	}
	r.p, r.identity = p, ""
	return nil
}

// Start starts the replicas that do not run, and waits until they are
// ready and one of them leads.
func (o *Oria) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(o.replicas))
	started := false
	for i, r := range o.replicas {
		if r.running() {
			continue
		}
		started = true
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = o.start(ctx, r) }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	deadline := time.Now().Add(takeoverMax)
	for {
		if r := o.leader(ctx); r != nil && r.running() {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no oria replica leads %s after %s (holder %q)", takeoverMax, leaseKey, o.holder(ctx))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if started {
		o.StartedAt = time.Now()
	}
	return nil
}

// Stop stops both replicas (SIGTERM: the leader releases the Lease).
func (o *Oria) Stop() {
	var wg sync.WaitGroup
	for _, r := range o.replicas {
		if r.running() {
			wg.Add(1)
			go func() { defer wg.Done(); r.p.Stop() }()
		}
	}
	wg.Wait()
}

// Running reports whether oria runs (a replica does).
func (o *Oria) Running() bool {
	return slices.ContainsFunc(o.replicas[:], (*replica).running)
}

// LogPaths are the logs of the replicas' current (or last) processes.
func (o *Oria) LogPaths() []string {
	return []string{o.replicas[0].logPath(o.dir), o.replicas[1].logPath(o.dir)}
}

// holder is the Lease's holder identity ("" when released or unreadable).
func (o *Oria) holder(ctx context.Context) string {
	var l coordinationv1.Lease
	if err := o.admin.Get(ctx, leaseKey, &l); err != nil {
		return ""
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// leader is the replica whose identity holds the Lease, or nil. A
// process's identity (host name and a random UUID) is learnt when it
// leads: the holder is the replica whose log says it acquired the Lease
// and whose identity is not known yet (a replica leads at most once: it
// exits when it loses the Lease).
func (o *Oria) leader(ctx context.Context) *replica {
	h := o.holder(ctx)
	if h == "" {
		return nil
	}
	for _, r := range o.replicas {
		if r.identity == h {
			return r
		}
	}
	for _, r := range o.replicas {
		if r.identity == "" && r.p != nil && acquired(r.p.LogPath) {
			r.identity = h
			return r
		}
	}
	return nil
}

// acquired reports whether the log says the process acquired the Lease.
func acquired(log string) bool {
	b, err := os.ReadFile(log)
	return err == nil && strings.Contains(strings.ToLower(string(b)), "successfully acquired lease")
}

// LeaderChange kills the leader (SIGKILL: it cannot release the Lease),
// calls dead every 250 ms until another replica holds the Lease (at most
// takeoverMax), then starts the killed one again as the standby. It
// returns what happened, for the log.
func (o *Oria) LeaderChange(ctx context.Context, dead func()) (string, error) {
	old := o.leader(ctx)
	if old == nil || !old.running() {
		return "", fmt.Errorf("no running replica leads (holder %q)", o.holder(ctx))
	}
	if err := old.p.Cmd.Process.Kill(); err != nil {
		return "", fmt.Errorf("killing the leader: %w", err)
	}
	killed := time.Now()
	<-old.p.Done()
	took := time.Duration(0)
	for took == 0 {
		dead()
		if r := o.leader(ctx); r != nil && r != old && r.running() {
			took = time.Since(killed)
			break
		}
		if time.Since(killed) > takeoverMax {
			return "", fmt.Errorf("no replica took over within %s of the leader's death (holder %q)", takeoverMax, o.holder(ctx))
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err := o.start(ctx, old); err != nil {
		return "", err
	}
	return fmt.Sprintf("killed the leader (replica %d); replica %d took over after %s; replica %d is the standby",
		old.slot, 1-old.slot, took.Round(100*time.Millisecond), old.slot), nil
}
