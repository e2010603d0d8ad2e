// Package reconciler is the one skeleton every oria controller reconciles
// with (after cluster-api's machine controller): get the object; when it is
// gone, clean up what oria created for it; gather what the reconcile needs
// into a plan; write through the engine; compute the status from the plan
// and the outcome with a pure function; write the status once, deferred,
// only when it changed (or hold a routine change back for a while, and
// requeue for it); and requeue explicitly, never by reading back the status
// just computed.
package reconciler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/firstpass"
	"github.com/operator-framework/oria/internal/status"
)

// Steps are the named steps of one controller's reconcile, implemented by
// its Reconciler (the same names in every controller, as operator-controller
// names its reconcile steps). T is the reconciled kind, P the plan, R what
// the writes did.
type Steps[T client.Object, P, R any] interface {
	// New returns an empty object to read into.
	New() T
	// Cleanup removes what oria created for the object named name, which is
	// gone.
	Cleanup(ctx context.Context, name string) error
	// Deleting handles an object that is being deleted (nil: nothing to do
	// before the garbage collector, and Cleanup once it is gone).
	Deleting(ctx context.Context, obj T) error
	// Gather reads what the reconcile needs and decides (the plan). An
	// error skips the writes.
	Gather(ctx context.Context, obj T) (P, error)
	// Write carries out the plan.
	Write(ctx context.Context, obj T, plan P) (R, error)
	// Status sets obj's status from the plan, the result and the error of
	// the reconcile (zero plan and result when gathering failed).
	Status(obj T, plan P, res R, err error)
	// Patch writes the status, given the object as read and as computed;
	// it must write nothing when the status did not change. It may hold a
	// change back instead (see status.Spacing): it then returns how long
	// the change waits, and the object is requeued after that long.
	Patch(ctx context.Context, before, after T) (hold time.Duration, err error)
	// Requeue returns when to look again although nothing changes (a
	// conflict with an object oria does not watch, the next instant of a
	// window); the zero Requeue for never. It is called only after a
	// reconcile without error.
	Requeue(plan P, res R) Requeue
}

// Requeue is when a reconcile looks again although nothing changes: after
// a while (After), at an instant (At), or both, whichever comes first.
type Requeue struct {
	// After: look again after this long (0: no).
	After time.Duration
	// At: look again at this instant, exactly (zero: none). It is measured
	// when the reconcile ends, after its status write, by the Steps' clock
	// (Clock) or time.Now, not when the plan was made; an instant passed
	// meanwhile is looked at at once.
	At time.Time
	// Priority is the priority of the requeue for At, over routine work
	// (0); it applies only when At comes first.
	Priority int
}

// In returns a Requeue after d (0: none).
func In(d time.Duration) Requeue { return Requeue{After: d} }

// Clock is implemented by Steps that judge instants by a clock of their
// own (a test's): Requeue.At is measured by it.
type Clock interface {
	Now() time.Time
}

// Slots is implemented by Steps whose reconciles of some objects take one
// of a bounded number of slots for their whole length (the ScopeInstance
// controller's bind slots): TakeSlot takes one for obj, read and not being deleted, before
// Gather, and the reconcile calls release once its status is written. An
// error (ctx ended while waiting) ends the reconcile.
type Slots[T client.Object] interface {
	TakeSlot(ctx context.Context, obj T) (release func(), err error)
}

// Reporter is implemented by Steps that report what the writes did, with
// Events and metrics (the ScopeInstance controller's counts of bindings
// written, its time-bound grants' Events and its binding latency): Report
// runs after Write, whatever it returned, and before Status, so that it
// sees obj's status as it was before this reconcile. It is not called when
// Gather failed.
type Reporter[T client.Object, P, R any] interface {
	Report(ctx context.Context, obj T, plan P, res R)
}

// Reconcile runs s for the object named in req, read with c (the cache).
func Reconcile[T client.Object, P, R any](ctx context.Context, req ctrl.Request, c client.Reader, s Steps[T, P, R]) (result ctrl.Result, retErr error) {
	obj := s.New()
	defer firstpass.Observe(ctx, obj, req.NamespacedName)
	if err := c.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, s.Cleanup(ctx, req.Name)
		}
		return ctrl.Result{}, fmt.Errorf("getting %s: %w", req.Name, err)
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, s.Deleting(ctx, obj)
	}
	if sl, ok := s.(Slots[T]); ok {
		release, err := sl.TakeSlot(ctx, obj)
		if err != nil {
			return ctrl.Result{}, err
		}
		defer release()
	}
	before := obj.DeepCopyObject().(T)
	var again Requeue
	defer func() {
		hold, err := s.Patch(ctx, before, obj)
		retErr = errors.Join(retErr, err)
		if retErr == nil {
			result = again.result(hold, s)
		}
	}()

	var res R
	plan, err := s.Gather(ctx, obj)
	if err == nil {
		res, err = s.Write(ctx, obj, plan)
		if rep, ok := s.(Reporter[T, P, R]); ok {
			rep.Report(ctx, obj, plan, res)
		}
	}
	s.Status(obj, plan, res, err)
	if err != nil {
		return ctrl.Result{}, err
	}
	again = s.Requeue(plan, res)
	return ctrl.Result{}, nil
}

// result is the controller-runtime result of q once the status is written,
// its change held back for hold: the soonest of After and hold, or At,
// measured now by s's clock, with its priority when it comes first.
func (q Requeue) result(hold time.Duration, s any) ctrl.Result {
	res := ctrl.Result{RequeueAfter: Soonest(q.After, hold)}
	if q.At.IsZero() {
		return res
	}
	now := time.Now
	if c, ok := s.(Clock); ok {
		now = c.Now
	}
	// At least a millisecond: an instant already passed is looked at at once.
	d := max(q.At.Sub(now()), time.Millisecond)
	if res.RequeueAfter == 0 || d <= res.RequeueAfter {
		res.RequeueAfter = d
		if q.Priority != 0 {
			res.Priority = ptr.To(q.Priority)
		}
	}
	return res
}

// StatusPatch returns a Patch step for one of oria's kinds: a merge patch
// of the status (of returns it) when it changed (see status.Patch).
func StatusPatch[T client.Object](c client.Client, of func(T) any) func(context.Context, T, T) (time.Duration, error) {
	return func(ctx context.Context, before, after T) (time.Duration, error) {
		return 0, status.Patch(ctx, c, before, after, of)
	}
}

// SpacedStatusPatch is StatusPatch for a kind whose routine status changes
// spacing spaces out (see status.PatchSpaced).
func SpacedStatusPatch[T client.Object](c client.Client, spacing *status.Spacing, of func(T) any, routine func(before, after T) bool) func(context.Context, T, T) (time.Duration, error) {
	return func(ctx context.Context, before, after T) (time.Duration, error) {
		return status.PatchSpaced(ctx, c, spacing, before, after, of, routine)
	}
}

// RecheckIf returns after when cond holds, else 0 (no requeue).
func RecheckIf(cond bool, after time.Duration) time.Duration {
	if cond {
		return after
	}
	return 0
}

// Soonest returns the smallest of durations that is not 0, or 0.
func Soonest(durations ...time.Duration) time.Duration {
	var out time.Duration
	for _, d := range durations {
		if d > 0 && (out == 0 || d < out) {
			out = d
		}
	}
	return out
}

// Requests lists objects into list with opts and returns a request for
// each, for a watch that maps one object to the oria objects that use it. A
// failed list is logged and maps to nothing: the cache does not fail.
func Requests(ctx context.Context, c client.Reader, list client.ObjectList, opts ...client.ListOption) []reconcile.Request {
	if err := c.List(ctx, list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing objects to requeue", "list", fmt.Sprintf("%T", list))
		return nil
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(items))
	for _, o := range items {
		if obj, ok := o.(client.Object); ok {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
		}
	}
	return reqs
}

// WarnOnTransition wraps the Patch step of one of oria's kinds: once the
// status is written, a Ready condition that has just entered a state the
// user should look at (not True, a new reason; Progressing is only a
// moment, and a Conflict is warned about where it is found) is recorded as
// one Warning event with that reason and message. Nothing is recorded
// while the condition stays as it was, nor for a write held back. A
// reconcile that ran on a cache not showing the previous status yet would
// see the same transition again: what was warned about is remembered per
// object in ws, which lives on the reconciler (until the object is Ready
// again, or for warnMemory).
func WarnOnTransition[T client.Object](ws *Warnings, rec events.EventRecorder, conditions func(T) []metav1.Condition,
	patch func(context.Context, T, T) (time.Duration, error)) func(context.Context, T, T) (time.Duration, error) {
	return func(ctx context.Context, before, after T) (time.Duration, error) {
		hold, err := patch(ctx, before, after)
		if err != nil || hold > 0 || rec == nil {
			return hold, err
		}
		ws.mu.Lock()
		defer ws.mu.Unlock()
		if ws.warned == nil {
			ws.warned = map[types.UID]warning{}
		}
		warned := ws.warned
		now := time.Now()
		if ready := meta.FindStatusCondition(conditions(after), oriav1alpha1.TypeReady); ready == nil || ready.Status == metav1.ConditionTrue {
			delete(warned, after.GetUID())
			return hold, nil
		}
		c := enteredTrouble(conditions(before), conditions(after))
		if c == nil {
			return hold, nil
		}
		w := warning{status: c.Status, reason: c.Reason, at: now}
		if last, ok := warned[after.GetUID()]; ok && last.status == w.status && last.reason == w.reason && now.Sub(last.at) < warnMemory {
			return hold, nil
		}
		if len(warned) >= maxWarned {
			for uid, last := range warned {
				if now.Sub(last.at) >= warnMemory {
					delete(warned, uid)
				}
			}
		}
		warned[after.GetUID()] = w
		rec.Eventf(after, nil, corev1.EventTypeWarning, c.Reason, "Reconcile", "%s", c.Message)
		return hold, nil
	}
}

// warnMemory is how long a warning is remembered; maxWarned how many
// objects' warnings are kept before the old ones are dropped.
const (
	warnMemory = 10 * time.Minute
	maxWarned  = 10000
)

// Warnings remembers what a controller warned about, per object; the zero
// value is ready to use.
type Warnings struct {
	mu     sync.Mutex
	warned map[types.UID]warning
}

type warning struct {
	status metav1.ConditionStatus
	reason string
	at     time.Time
}

// enteredTrouble returns the Ready condition of after when it differs in
// status or reason from before's and is one to warn about. A time-bound
// grant that has not started (Pending) or has ended (Expired) is as its
// spec says, not in trouble.
func enteredTrouble(before, after []metav1.Condition) *metav1.Condition {
	now := meta.FindStatusCondition(after, oriav1alpha1.TypeReady)
	if now == nil || now.Status == metav1.ConditionTrue {
		return nil
	}
	switch now.Reason {
	case oriav1alpha1.ReasonProgressing, oriav1alpha1.ReasonConflict, oriav1alpha1.ReasonPending, oriav1alpha1.ReasonExpired:
		return nil
	}
	if was := meta.FindStatusCondition(before, oriav1alpha1.TypeReady); was != nil && was.Status == now.Status && was.Reason == now.Reason {
		return nil
	}
	return now
}
