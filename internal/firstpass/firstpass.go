// Package firstpass says when oria's first full pass is done: for each kind
// a controller reconciles (ClusterExtension, RBACPolicy, ScopeTemplate,
// ScopeInstance), the moment every object of that kind that existed when
// the replica started leading has been reconciled once since (an object
// deleted meanwhile counts once its removal was reconciled). After a restart
// or a leader handover, that is when oria has looked at everything again.
//
// It is said twice: a log line per kind (Message, with the kind, the number
// of objects and the seconds since the replica started leading) and one more
// when every kind is done (AllMessage); and the gauges
// oria_first_pass_done{kind} (0, then 1) and oria_first_pass_seconds{kind}.
//
// A Tracker belongs to one manager: New makes it, Context carries it into
// the manager's runnables (manager.Options.BaseContext), Setup registers its
// runnable, which lists each kind from the manager's cache once elected, and
// reconciler.Reconcile reports each reconcile to the Tracker of its context
// (Observe). Without one in the context, Observe does nothing.
package firstpass

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// Metric names and log messages.
const (
	DoneMetric    = "oria_first_pass_done"
	SecondsMetric = "oria_first_pass_seconds"
	Message       = "first full pass done"
	AllMessage    = "first full pass done for every kind"
)

// listRetry is how long the runnable waits before listing a kind again
// after a failed list.
const listRetry = time.Second

// The gauges are process-level, as oria's other metrics: a process has one
// registry (Setup registers them once); each Tracker sets its kinds' values.
var (
	doneGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: DoneMetric,
		Help: "1 once every object of the kind that existed when this replica started leading has been reconciled once since; 0 before.",
	}, []string{"kind"})
	secondsGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: SecondsMetric,
		Help: "Seconds from the moment this replica started leading to the end of its first full pass over the kind (0 until then).",
	}, []string{"kind"})
	registerOnce sync.Once
	registerErr  error
)

// Kind is one reconciled kind: its name in logs and metrics, an empty
// object of its Go type (what the reconciler reads into) and a new list.
type Kind struct {
	Name   string
	Object client.Object
	List   func() client.ObjectList
}

// Kinds are the kinds oria's controllers reconcile with reconciler.Reconcile.
func Kinds() []Kind {
	return []Kind{
		{Name: ocv1.ClusterExtensionKind, Object: &ocv1.ClusterExtension{}, List: func() client.ObjectList { return &ocv1.ClusterExtensionList{} }},
		{Name: "RBACPolicy", Object: &oriav1alpha1.RBACPolicy{}, List: func() client.ObjectList { return &oriav1alpha1.RBACPolicyList{} }},
		{Name: "ScopeTemplate", Object: &oriav1alpha1.ScopeTemplate{}, List: func() client.ObjectList { return &oriav1alpha1.ScopeTemplateList{} }},
		{Name: "ScopeInstance", Object: &oriav1alpha1.ScopeInstance{}, List: func() client.ObjectList { return &oriav1alpha1.ScopeInstanceList{} }},
	}
}

// Tracker follows the first full pass of one manager's controllers.
type Tracker struct {
	log   logr.Logger
	now   func() time.Time
	kinds map[reflect.Type]*pass
	order []*pass

	mu      sync.Mutex
	started time.Time // when the replica started leading (Begin)
	left    int       // kinds not done
}

// pass is one kind's first pass. Before the kind is listed, seen collects
// what was reconciled; the list then leaves pending what was not, and each
// reconcile takes its key out. done is read without the lock.
type pass struct {
	kind    Kind
	seen    map[types.NamespacedName]struct{}
	pending map[types.NamespacedName]struct{}
	listed  bool
	objects int
	done    atomic.Bool
}

// New returns a Tracker of kinds (Kinds() in oria).
func New(log logr.Logger, kinds ...Kind) *Tracker {
	t := &Tracker{log: log, now: time.Now, kinds: map[reflect.Type]*pass{}, left: len(kinds)}
	for _, k := range kinds {
		p := &pass{kind: k, seen: map[types.NamespacedName]struct{}{}}
		t.kinds[reflect.TypeOf(k.Object)] = p
		t.order = append(t.order, p)
		doneGauge.WithLabelValues(k.Name).Set(0)
		secondsGauge.WithLabelValues(k.Name).Set(0)
	}
	return t
}

type contextKey struct{}

// Context returns a context carrying t, for manager.Options.BaseContext:
// every runnable of the manager, its controllers' reconciles included, then
// reports to t.
func (t *Tracker) Context() context.Context {
	return context.WithValue(context.Background(), contextKey{}, t)
}

// Observe tells the Tracker in ctx, if any, that the object named key, of
// obj's Go type, was reconciled (reconciler.Reconcile calls it).
func Observe(ctx context.Context, obj client.Object, key types.NamespacedName) {
	if t, ok := ctx.Value(contextKey{}).(*Tracker); ok {
		t.Observe(obj, key)
	}
}

// Observe records that the object named key, of obj's Go type, was
// reconciled. It costs nothing once its kind's pass is done.
func (t *Tracker) Observe(obj client.Object, key types.NamespacedName) {
	p := t.kinds[reflect.TypeOf(obj)]
	if p == nil || p.done.Load() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !p.listed {
		p.seen[key] = struct{}{}
		return
	}
	delete(p.pending, key)
	t.finishIfDone(p)
}

// Begin marks the moment the replica starts leading: the pass's seconds
// count from here.
func (t *Tracker) Begin() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.started = t.now()
}

// Listed gives the kind named name the objects that exist now (from the
// cache the controllers read): the pass of the kind is done once each of
// them not reconciled since start has been.
func (t *Tracker) Listed(name string, keys []types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.order {
		if p.kind.Name != name || p.listed {
			continue
		}
		p.listed, p.objects = true, len(keys)
		p.pending = make(map[types.NamespacedName]struct{}, len(keys))
		for _, k := range keys {
			if _, ok := p.seen[k]; !ok {
				p.pending[k] = struct{}{}
			}
		}
		p.seen = nil
		t.finishIfDone(p)
	}
}

// finishIfDone ends p's pass when nothing is pending (t.mu held).
func (t *Tracker) finishIfDone(p *pass) {
	if !p.listed || len(p.pending) > 0 || p.done.Load() {
		return
	}
	p.pending = nil
	p.done.Store(true)
	seconds := t.now().Sub(t.started).Seconds()
	doneGauge.WithLabelValues(p.kind.Name).Set(1)
	secondsGauge.WithLabelValues(p.kind.Name).Set(seconds)
	t.log.Info(Message, "kind", p.kind.Name, "objects", p.objects, "seconds", seconds)
	if t.left--; t.left == 0 {
		t.log.Info(AllMessage, "seconds", seconds)
	}
}

// Done reports whether the pass of the kind named name is done.
func (t *Tracker) Done(name string) bool {
	for _, p := range t.order {
		if p.kind.Name == name {
			return p.done.Load()
		}
	}
	return false
}

// Setup registers the gauges (once per process) and the Tracker's runnable
// with mgr: once the replica leads, it lists every kind from mgr's cache.
func (t *Tracker) Setup(mgr ctrl.Manager) error {
	registerOnce.Do(func() { registerErr = register(crmetrics.Registry) })
	if registerErr != nil {
		return registerErr
	}
	return mgr.Add(&runnable{t: t, reader: mgr.GetCache()})
}

func register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{doneGauge, secondsGauge} {
		if err := r.Register(c); err != nil {
			return fmt.Errorf("registering the first-pass metrics: %w", err)
		}
	}
	return nil
}

// runnable lists each kind once the replica leads (NeedLeaderElection: as
// the controllers).
type runnable struct {
	t      *Tracker
	reader client.Reader
}

func (r *runnable) NeedLeaderElection() bool { return true }

// Start begins the pass and lists each kind, retrying a failed list; a
// kind the API server does not serve (OLM v1 not installed) has nothing to
// reconcile.
func (r *runnable) Start(ctx context.Context) error {
	r.t.Begin()
	for _, p := range r.t.order {
		var keys []types.NamespacedName
		err := wait.PollUntilContextCancel(ctx, listRetry, true, func(ctx context.Context) (bool, error) {
			var err error
			keys, err = listKeys(ctx, r.reader, p.kind)
			if err != nil {
				r.t.log.Error(err, "listing for the first full pass; retrying", "kind", p.kind.Name)
				return false, nil
			}
			return true, nil
		})
		if err != nil {
			return nil // stopped
		}
		r.t.Listed(p.kind.Name, keys)
	}
	<-ctx.Done()
	return nil
}

// listKeys lists the keys of kind's objects from r (no match: none).
func listKeys(ctx context.Context, r client.Reader, kind Kind) ([]types.NamespacedName, error) {
	list := kind.List()
	if err := r.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	keys := make([]types.NamespacedName, 0, len(items))
	for _, o := range items {
		if obj, ok := o.(client.Object); ok {
			keys = append(keys, client.ObjectKeyFromObject(obj))
		}
	}
	return keys, nil
}
