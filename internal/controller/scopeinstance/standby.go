package scopeinstance

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/ownership"
)

// The standby: a revocation that is due never waits for a leader. Only the
// leader reconciles, and a killed leader is replaced only once its Lease
// runs out (15 s by default). So every replica that does not lead runs a
// Standby, a runnable without leader election over the same caches (which
// run on every replica): at each instance's expiresAt, plus StandbyGrace,
// and StandbyGrace after any change of an instance whose window is closed
// (an admitted narrowing, `kubectl oria revoke`), it looks in its cache for
// what of that instance still grants, and if something does, and the API
// server's copy of the instance agrees that its window is closed, it ends
// that access:
//
//   - a gate that holds rules is emptied (sealGates: a JSON patch
//     tested against the resourceVersion its cache showed, so it never
//     creates a gate and never overwrites a change it did not see);
//   - every binding of the instance that grants is deleted
//     (engine.Delete: UID preconditions), except those of its gate, which
//     grant nothing once the gate is empty.
//
// It only takes away: it never creates a binding or a gate, never adds a
// rule, writes no status and no Event; what is left (the gate's bindings,
// the gate, the Expired status) is the leader's, as soon as there is one.
// Both may delete the same binding: a deletion is idempotent (an object
// already gone, or replaced, counts as deleted). It judges the window by
// its own clock, as compiled (whole seconds): a replica whose clock runs
// ahead revokes that much early, which fails closed. The leader does not
// run it (its controller revokes at the instant, exactly: Requeue), nor
// does a replica once it leads.

// StandbyGrace is how long after a window closes a standby replica looks
// at it: the leader, when there is one, has revoked by then (well within
// it on the test machine: docs/benchmarks.md, "Figures behind the code":
// standby grace), so that a standby rarely writes
// anything while the leader lives; and a standby's own revocation (a cache
// read, one read of the instance, a few writes) lands well within a second
// of expiresAt.
const StandbyGrace = 300 * time.Millisecond

// standbyRetry is how soon a standby looks again after a write failed (or
// found its gate changed meanwhile).
const standbyRetry = 200 * time.Millisecond

// Standby ends the access of closed windows on a replica that does not
// lead (see above). Make one with NewStandby; the manager runs it
// (NeedLeaderElection is false).
type Standby struct {
	deps Deps
	// informers gives the ScopeInstance informer its handler.
	informers cache.Informers
	// elected is closed once this replica leads (ctrl.Manager.Elected).
	elected <-chan struct{}
	now     func() time.Time
	grace   time.Duration

	mu     sync.Mutex
	ctx    context.Context
	timers map[string]*time.Timer
}

// NewStandby returns the standby of a replica: d as the controller's
// dependencies (its client and cache reads, the binding index, the engine),
// informers the manager's cache, elected the manager's Elected. now is
// time.Now and grace StandbyGrace unless set (tests).
func NewStandby(d Deps, informers cache.Informers, elected <-chan struct{}, now func() time.Time, grace time.Duration) *Standby {
	if now == nil {
		now = time.Now
	}
	return &Standby{deps: d, informers: informers, elected: elected, now: now, grace: cmp.Or(grace, StandbyGrace), timers: map[string]*time.Timer{}}
}

// NeedLeaderElection is false: the standby runs on every replica.
func (s *Standby) NeedLeaderElection() bool { return false }

// Start schedules a look at every instance's closing instant, from the
// ScopeInstance informer's events, until ctx ends.
func (s *Standby) Start(ctx context.Context) error {
	s.mu.Lock()
	s.ctx = ctx
	s.mu.Unlock()
	inf, err := s.informers.GetInformer(ctx, &oriav1alpha1.ScopeInstance{})
	if err != nil {
		return fmt.Errorf("the standby's ScopeInstance informer: %w", err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { s.schedule(o) },
		UpdateFunc: func(_, o any) { s.schedule(o) },
		DeleteFunc: func(o any) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if si, ok := o.(*oriav1alpha1.ScopeInstance); ok {
				s.set(si.Name, time.Time{})
			}
		},
	})
	if err != nil {
		return fmt.Errorf("the standby's ScopeInstance handler: %w", err)
	}
	<-ctx.Done()
	_ = inf.RemoveEventHandler(reg)
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, t := range s.timers {
		t.Stop()
		delete(s.timers, name)
	}
	return nil
}

// leads reports whether this replica leads (its controller revokes).
func (s *Standby) leads() bool {
	select {
	case <-s.elected:
		return true
	default:
		return false
	}
}

// schedule sets the instance's look: StandbyGrace from now when its window
// is closed, StandbyGrace after its expiresAt when open; none otherwise.
func (s *Standby) schedule(o any) {
	si, ok := o.(*oriav1alpha1.ScopeInstance)
	if !ok || s.leads() {
		return
	}
	s.set(si.Name, s.lookAt(si))
}

// lookAt is when the standby looks at si: zero for never.
func (s *Standby) lookAt(si *oriav1alpha1.ScopeInstance) time.Time {
	w := binding.InstanceWindow(si.Spec)
	now := s.now()
	switch phase, _ := w.At(now); {
	case phase != binding.WindowOpen:
		return now.Add(s.grace)
	case w.ExpiresAt != nil:
		return w.ExpiresAt.Add(s.grace)
	}
	return time.Time{}
}

// set replaces the instance's timer by one at at (none when zero).
func (s *Standby) set(name string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.timers[name]; t != nil {
		t.Stop()
		delete(s.timers, name)
	}
	if at.IsZero() || s.ctx == nil || s.ctx.Err() != nil {
		return
	}
	s.timers[name] = time.AfterFunc(max(time.Until(at), 0), func() { s.look(name) })
}

// look ends what still grants of the named instance if its window is
// closed, and looks again soon if that failed.
func (s *Standby) look(name string) {
	s.mu.Lock()
	ctx := s.ctx
	s.mu.Unlock()
	if s.leads() || ctx.Err() != nil {
		return
	}
	log := ctrl.Log.WithName("standby").WithValues("ScopeInstance", name)
	again, err := s.revoke(ctrl.LoggerInto(ctx, log), name)
	if err != nil {
		log.Error(err, "ending the access of a closed window, as a standby")
	}
	if again {
		s.set(name, s.now().Add(standbyRetry))
	}
}

// revoke is one look at the named instance: whether to look again soon.
func (s *Standby) revoke(ctx context.Context, name string) (again bool, err error) {
	si := &oriav1alpha1.ScopeInstance{}
	if err := s.deps.Client.Get(ctx, types.NamespacedName{Name: name}, si); err != nil {
		return !apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}
	now := s.now()
	if phase, _ := binding.InstanceWindow(si.Spec).At(now); phase == binding.WindowOpen {
		s.set(name, s.lookAt(si)) // looked early (a clock step); not due yet
		return false, nil
	}
	gate, bindings, err := s.cached(ctx, si)
	if err != nil {
		return true, err
	}
	gate, bindings = standbyGrants(si, gate, bindings)
	if gate == nil && bindings.Len() == 0 {
		return false, nil
	}
	// The API server's copy decides: a window widened again (admitted as
	// a grant) that the cache does not show yet is left to the leader.
	live := &oriav1alpha1.ScopeInstance{}
	if err := s.deps.APIReader.Get(ctx, types.NamespacedName{Name: name}, live); err != nil {
		return !apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}
	if phase, _ := binding.InstanceWindow(live.Spec).At(now); live.UID != si.UID || phase == binding.WindowOpen {
		return false, nil
	}
	w := &engine.Writer{Client: s.deps.Client, Revoker: s.deps.Client, Engine: s.deps.Engine}
	var sealed []engine.Outcome
	if gate != nil {
		sealed = sealGates(ctx, w, []*rbacv1.ClusterRole{gate})
	}
	sum := engine.Summarize(sealed, engine.DeleteSet(ctx, w, bindings).All())
	ctrl.LoggerFrom(ctx).Info("ended the access of a closed window as a standby replica (the leader finishes the rest)",
		"window", binding.InstanceWindow(live.Spec).Describe(now), "gateEmptied", gate != nil && len(sum.Errors) == 0,
		"bindingsDeleted", sum.Count[engine.Deleted], "failed", len(sum.Errors))
	return len(sum.Errors) > 0, summarizeErrors(sum.Errors)
}

// sealGates empties gates as a replica that does not lead does: each gate,
// as the cache shows it, loses every rule but its seal
// (ownership.GateSeal) and any aggregationRule, in one JSON patch tested
// against the resourceVersion the cache showed (engine.PatchTested). Unlike
// the leader's emptyGates it never creates and never writes over a change
// it did not see: a gate deleted meanwhile counts as emptied, one the
// leader changed meanwhile is left alone (Failed: looked at again). It
// writes under oria's field manager, as the leader does; the leader's later
// applies force their ownership, so nobody fights over the rules. A gate
// already empty costs nothing.
func sealGates(ctx context.Context, w *engine.Writer, gates []*rbacv1.ClusterRole) []engine.Outcome {
	var todo []*rbacv1.ClusterRole
	for _, g := range gates {
		if g != nil && (ownership.GateGrants(g) || g.AggregationRule != nil) {
			todo = append(todo, g)
		}
	}
	return engine.PatchTested(ctx, w, gateKind.Name, todo, func(g *rbacv1.ClusterRole) []map[string]any {
		return []map[string]any{
			{"op": "add", "path": "/rules", "value": []rbacv1.PolicyRule{ownership.GateSeal(g.Name)}},
			{"op": "add", "path": "/aggregationRule", "value": nil},
		}
	})
}

// cached returns the instance's gate (nil when the cache shows none of
// this instance's) and bindings as the cache shows them.
func (s *Standby) cached(ctx context.Context, si *oriav1alpha1.ScopeInstance) (*rbacv1.ClusterRole, binding.Set, error) {
	r := &Reconciler{Deps: s.deps}
	existing, err := r.existingBindings(si.Name)
	if err != nil {
		return nil, binding.Set{}, err
	}
	gate := &rbacv1.ClusterRole{}
	err = s.deps.Client.Get(ctx, types.NamespacedName{Name: binding.GateName(si.Name, string(si.UID))}, gate)
	if apierrors.IsNotFound(err) || (err == nil && !ownership.ControlledByUID(gate, si.UID)) {
		return nil, existing, nil
	}
	if err != nil {
		return nil, binding.Set{}, fmt.Errorf("reading the gate of ScopeInstance %q: %w", si.Name, err)
	}
	return gate, existing, nil
}

// standbyGrants returns what of an instance outside its window still
// grants, and so is the standby's to end: its gate (nil when it has none,
// or it holds no rule but its seal) and every binding, except the
// RoleBindings of its gate while the gate is there to be emptied or empty
// (they then grant nothing; the leader deletes them). A binding of a gate
// name that the cache shows no gate of this instance's under grants
// whatever a role made under that name would: it goes. Pure.
func standbyGrants(si *oriav1alpha1.ScopeInstance, gate *rbacv1.ClusterRole, bindings binding.Set) (*rbacv1.ClusterRole, binding.Set) {
	gateName := ""
	if gate != nil && ownership.ControlledByUID(gate, si.UID) {
		gateName = gate.Name
	}
	if gateName == "" || (!ownership.GateGrants(gate) && gate.AggregationRule == nil) {
		gate = nil
	}
	if gateName == "" {
		return gate, bindings
	}
	return gate, bindings.Filter(func(b client.Object) bool { return binding.RoleOf(b) != gateName })
}
