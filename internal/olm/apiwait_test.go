package olm

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

func TestServesKind(t *testing.T) {
	for _, tc := range []struct {
		name string
		list *metav1.APIResourceList
		want bool
	}{
		{"no list", nil, false},
		{"empty", &metav1.APIResourceList{}, false},
		{"served", &metav1.APIResourceList{APIResources: []metav1.APIResource{
			{Name: "clusterextensions", Kind: "ClusterExtension"}, {Name: "clusterextensions/status", Kind: "ClusterExtension"},
		}}, true},
		{"status only", &metav1.APIResourceList{APIResources: []metav1.APIResource{{Name: "clusterextensions/status", Kind: "ClusterExtension"}}}, false},
		{"other kinds", &metav1.APIResourceList{APIResources: []metav1.APIResource{{Name: "clustercatalogs", Kind: "ClusterCatalog"}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := servesKind(tc.list, "ClusterExtension"); got != tc.want {
				t.Errorf("servesKind = %v, want %v", got, tc.want)
			}
		})
	}
}

// waitRig is an API wait with a scripted probe, a recording log and observer,
// and the runnables it adds.
type waitRig struct {
	served  atomic.Bool
	failing atomic.Bool // the probe fails
	probes  atomic.Int32

	mu        sync.Mutex
	logs      []string
	observed  []bool
	runnables []ctrlmanager.Runnable
}

func (r *waitRig) wait(t *testing.T) *APIWait {
	t.Helper()
	log := funcr.New(func(prefix, args string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.logs = append(r.logs, args)
	}, funcr.Options{Verbosity: 1})
	probe := func(context.Context) (bool, error) {
		r.probes.Add(1)
		if r.failing.Load() {
			return false, errors.New("discovery hiccup")
		}
		return r.served.Load(), nil
	}
	add := func(rn ctrlmanager.Runnable) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.runnables = append(r.runnables, rn)
		return nil
	}
	g, err := newAPIWait(probe, add, logr.New(log.GetSink()), APIWaitOptions{
		Waiting: "the ClusterExtension controller", Serving: "ScopeInstances",
		Interval: 5 * time.Millisecond,
		Observe: func(ok bool) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.observed = append(r.observed, ok)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// count returns how many log lines contain msg.
func (r *waitRig) count(msg string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, l := range r.logs {
		if strings.Contains(l, msg) {
			n++
		}
	}
	return n
}

func (r *waitRig) state() ([]bool, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]bool(nil), r.observed...), len(r.runnables)
}

// With OLM v1 installed the wait is over from the start: setups run at
// once, nothing waits, nothing is logged.
func TestAPIWaitOpenAtStart(t *testing.T) {
	r := &waitRig{}
	r.served.Store(true)
	g := r.wait(t)
	ran := 0
	if err := g.Then(func() error { ran++; return nil }); err != nil {
		t.Fatal(err)
	}
	observed, runnables := r.state()
	if d := cmp.Diff([]bool{true}, observed); d != "" || ran != 1 || runnables != 0 || !g.Available() {
		t.Errorf("observed (-want +got) %s; setup ran %d times (want 1); %d runnables added (want 0); available %v", d, ran, runnables, g.Available())
	}
	if n := r.count(MissingMessage) + r.count(ServedMessage); n != 0 {
		t.Errorf("%d API wait messages logged, want none: %q", n, r.logs)
	}
}

// Without OLM v1: one message, setups and deferred watches wait; the API
// appears: setups run in order, the watches start on their queues, one
// message, the observer told false then true.
func TestAPIWaitWaitsThenOpens(t *testing.T) {
	r := &waitRig{}
	g := r.wait(t)
	r.failing.Store(true)
	var order []string
	for _, name := range []string{"extension", "second"} {
		if err := g.Then(func() error { order = append(order, name); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	var started atomic.Int32
	inner := source.Func(func(context.Context, workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		started.Add(1)
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	deferred := g.Defer(inner)
	if err := deferred.Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	observed, runnables := r.state()
	if d := cmp.Diff([]bool{false}, observed); d != "" || runnables != 1 || g.Available() {
		t.Fatalf("before the API: observed (-want +got) %s; %d runnables (want 1); available %v", d, runnables, g.Available())
	}
	done := make(chan error, 1)
	go func() { done <- g.Start(ctx) }()
	// Probes fail, then say "not served", then "served".
	waitFor(t, func() bool { return r.probes.Load() >= 3 })
	r.failing.Store(false)
	waitFor(t, func() bool { return r.probes.Load() >= 6 })
	if len(order) != 0 || started.Load() != 0 || g.Available() {
		t.Fatalf("opened before the API was served: setups %v, watch started %d times", order, started.Load())
	}
	r.served.Store(true)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the API wait did not open")
	}
	waitFor(t, func() bool { return started.Load() == 1 })
	observed, _ = r.state()
	if d := cmp.Diff([]string{"extension", "second"}, order); d != "" {
		t.Errorf("setups (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]bool{false, true}, observed); d != "" {
		t.Errorf("observed (-want +got):\n%s", d)
	}
	if m, s := r.count(MissingMessage), r.count(ServedMessage); m != 1 || s != 1 {
		t.Errorf("logged the missing message %d times and the served one %d times, want 1 and 1: %q", m, s, r.logs)
	}
	// After opening: setups and watches start at once.
	if err := g.Then(func() error { order = append(order, "late"); return nil }); err != nil || len(order) != 3 {
		t.Errorf("a setup after opening: err %v, setups %v", err, order)
	}
	if err := g.Defer(inner).Start(ctx, q); err != nil || started.Load() != 2 {
		t.Errorf("a watch after opening: err %v, started %d times (want 2)", err, started.Load())
	}
}

// Discovery failing at start is said as such, once; the wait then waits as
// without OLM v1.
func TestAPIWaitDiscoveryFailsAtStart(t *testing.T) {
	r := &waitRig{}
	r.failing.Store(true)
	g := r.wait(t)
	if u, m := r.count(UnknownMessage), r.count(MissingMessage); u != 1 || m != 0 || g.Available() {
		t.Fatalf("logged the unknown message %d times (want 1) and the missing one %d times (want 0); available %v: %q", u, m, g.Available(), r.logs)
	}
	r.failing.Store(false)
	r.served.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Start(ctx); err != nil || !g.Available() {
		t.Errorf("Start = %v, available %v; want nil, true", err, g.Available())
	}
}

// A setup that fails when the wait ends stops the manager (Start returns
// its error); a manager stopped first returns without opening.
func TestAPIWaitStartErrors(t *testing.T) {
	r := &waitRig{}
	g := r.wait(t)
	if err := g.Then(func() error { return errors.New("duplicate controller name") }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Start(ctx); err != nil || g.Available() {
		t.Errorf("stopped before the API: Start = %v, available %v; want nil, false", err, g.Available())
	}
	r.served.Store(true)
	err := g.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "duplicate controller name") {
		t.Errorf("Start = %v, want the setup's error", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}
