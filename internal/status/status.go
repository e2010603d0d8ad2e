// Package status writes the status of oria's own objects.
package status

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// Patch writes obj's status when it differs from before's (status returns
// the status struct of an object), so that a reconcile of an unchanged world
// writes nothing. oria owns the whole status of its kinds, so a merge patch
// against the snapshot taken at the start of the reconcile is enough. An
// object deleted meanwhile is not an error.
func Patch[T client.Object](ctx context.Context, c client.Client, before, obj T, status func(T) any) error {
	if equality.Semantic.DeepEqual(status(before), status(obj)) {
		return nil
	}
	return write(ctx, c, before, obj)
}

// PatchSpaced is Patch for a kind whose routine status changes (routine
// tells them) s spaces out: such a change is not written while s holds it
// back, and PatchSpaced returns how long it waits; the caller looks again
// then (a later reconcile writes it, with whatever else changed by then).
func PatchSpaced[T client.Object](ctx context.Context, c client.Client, s *Spacing, before, obj T, status func(T) any, routine func(before, after T) bool) (time.Duration, error) {
	if equality.Semantic.DeepEqual(status(before), status(obj)) {
		return 0, nil
	}
	if wait := s.Wait(obj.GetName(), routine(before, obj)); wait > 0 {
		return wait, nil
	}
	if err := write(ctx, c, before, obj); err != nil {
		return 0, err
	}
	s.Wrote(obj.GetName())
	return 0, nil
}

// write patches obj's status; an object deleted meanwhile is not an error.
func write[T client.Object](ctx context.Context, c client.Client, before, obj T) error {
	err := c.Status().Patch(ctx, obj, client.MergeFrom(before), client.FieldOwner(oriav1alpha1.FieldOwner))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patching status of %s %q: %w", reflect.TypeOf(obj).Elem().Name(), obj.GetName(), err)
	}
	return nil
}

// Enumerate joins items for a message, naming at most max of them:
// "a, b, c and 7 more".
func Enumerate(items []string, max int) string {
	if len(items) <= max {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:max], ", "), len(items)-max)
}

// SetReady sets the Ready condition of an object of generation gen in
// conds.
func SetReady(conds *[]metav1.Condition, gen int64, s metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(conds, metav1.Condition{
		Type: oriav1alpha1.TypeReady, Status: s, Reason: reason, Message: message, ObservedGeneration: gen,
	})
}

// Ready sets the Ready condition of one status being computed.
type Ready func(s metav1.ConditionStatus, reason, message string)

// Begin is the prologue of every controller's pure status computation, on
// the copy of the status it computes (its conditions and observed
// generation) for an object of generation gen. planned tells whether the
// reconcile evaluated the current spec (it has a plan): then the observed
// generation advances and ok is true. Otherwise gathering failed with err,
// nothing was decided, Ready is Unknown (ReconcileError) with err's message
// and everything else stays where it was (ok false: the computation ends).
func Begin(conds *[]metav1.Condition, observedGeneration *int64, gen int64, planned bool, err error) (ready Ready, ok bool) {
	ready = func(s metav1.ConditionStatus, reason, message string) { SetReady(conds, gen, s, reason, message) }
	if !planned {
		ready(metav1.ConditionUnknown, oriav1alpha1.ReasonReconcileError, err.Error())
		return ready, false
	}
	*observedGeneration = gen
	return ready, true
}
