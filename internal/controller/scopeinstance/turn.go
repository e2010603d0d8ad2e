package scopeinstance

import (
	"context"
	"time"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
)

// Fan-outs, and everything else. The controller's workers are the
// fan-outs it binds at once (MaxConcurrentReconciles,
// DefaultMaxConcurrentReconciles) plus RevokeWorkers. A fan-out (an
// instance with a namespace selector, or listing more than binding.SmallGrant
// namespaces) holds one of the bind slots while it reconciles inside its
// window: its plan holds a desired binding per namespace and its writes
// fill the engine's tokens. Every other reconcile holds none: a revocation
// (outside the window, a deleted instance), a small grant (a few listed
// namespaces, or cluster-wide). So the grants that expire, or start,
// together are revoked, or bound, together, not MaxConcurrentReconciles at
// a time behind one another, and none waits for a fan-out in progress,
// only, when every worker is busy, for the first reconcile to finish.
//
// A reconcile's turn also makes its instance's next window instant exact:
// the controller requeues the instance at that instant, not that instant
// plus the time the status write after the requeue's computation took, and
// with a priority over routine work (instantPriority, window.go).

// fanout reports whether an instance's reconcile inside its window takes a
// bind slot: it selects its namespaces, or lists more than
// binding.SmallGrant (binding.FanOut).
func fanout(spec oriav1alpha1.ScopeInstanceSpec) bool {
	return binding.FanOut(spec)
}

// RevokeWorkers are the controller's workers beyond its bind slots: the
// revocations and small grants it runs at once while every bind slot is
// taken.
const RevokeWorkers = 12

// turn is one reconcile's state beyond its plan, in its context
// (withTurn): the bind slot it holds, and the instant to requeue its
// instance at for its window, with that requeue's priority.
type turn struct {
	binds chan struct{}
	held  bool
	// at is the next instant that changes the window's phase (zero: none
	// ahead, or not judged), priority that requeue's priority.
	at       time.Time
	priority int
}

type turnKey struct{}

// withTurn returns ctx carrying a new turn that takes its bind slot from
// binds.
func withTurn(ctx context.Context, binds chan struct{}) (context.Context, *turn) {
	t := &turn{binds: binds}
	return context.WithValue(ctx, turnKey{}, t), t
}

// turnFrom returns the turn in ctx, nil when none (a step called alone,
// in a unit test).
func turnFrom(ctx context.Context) *turn {
	t, _ := ctx.Value(turnKey{}).(*turn)
	return t
}

// bind waits for a bind slot (once per turn), or for ctx to end.
func (t *turn) bind(ctx context.Context) error {
	if t == nil || t.held || t.binds == nil {
		return nil
	}
	select {
	case t.binds <- struct{}{}:
		t.held = true
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// done gives the bind slot back.
func (t *turn) done() {
	if t != nil && t.held {
		<-t.binds
		t.held = false
	}
}

// requeueAt records the window's next instant and the priority of the
// requeue for it.
func (t *turn) requeueAt(at time.Time, priority int) {
	if t != nil {
		t.at, t.priority = at, priority
	}
}

// result returns res requeued exactly at the window's instant, measured
// from now, with its priority, when that instant comes first; res as it
// is after an error (retried with backoff) or without an instant.
func (t *turn) result(res ctrl.Result, err error, now time.Time) ctrl.Result {
	if t == nil || err != nil || t.at.IsZero() {
		return res
	}
	d := max(t.at.Sub(now), time.Millisecond)
	if res.RequeueAfter == 0 || d <= res.RequeueAfter {
		res.RequeueAfter, res.Priority = d, ptr.To(t.priority)
	}
	return res
}
