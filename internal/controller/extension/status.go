package extension

import (
	"context"
	"fmt"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// setCondition writes oria's RBACManaged condition on ce when it differs
// from the one ce has, and records an Event for notable transitions.
//
// The ClusterExtension's status belongs to operator-controller, which writes
// its own conditions with GET + Update. oria therefore never updates the
// status: it server-side applies a status holding only its own condition,
// with its own field owner. status.conditions is a list-map keyed by type,
// so the apply merges oria's entry into the list and owns only that entry;
// operator-controller's Updates carry oria's entry along unchanged (and the
// API server keeps oria as its owner), so neither erases the other.
func (r *Reconciler) setCondition(ctx context.Context, ce *ocv1.ClusterExtension, cond metav1.Condition) error {
	cond.Type = oriav1alpha1.TypeRBACManaged
	cond.ObservedGeneration = ce.Generation
	old := meta.FindStatusCondition(ce.Status.Conditions, cond.Type)
	if old != nil && old.Status == cond.Status && old.Reason == cond.Reason &&
		old.Message == cond.Message && old.ObservedGeneration == cond.ObservedGeneration {
		return nil
	}
	if old != nil && old.Status == cond.Status {
		cond.LastTransitionTime = old.LastTransitionTime
	} else {
		cond.LastTransitionTime = metav1.Now()
	}

	c, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&cond)
	if err != nil {
		return fmt.Errorf("converting condition: %w", err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": ocv1.GroupVersion.String(),
		"kind":       ocv1.ClusterExtensionKind,
		"metadata":   map[string]any{"name": ce.Name},
		"status":     map[string]any{"conditions": []any{c}},
	}}
	err = r.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(oriav1alpha1.FieldOwner), client.ForceOwnership)
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile; the next reconcile cleans up
	}
	if err != nil {
		return fmt.Errorf("applying condition %s to ClusterExtension %q: %w", cond.Type, ce.Name, err)
	}
	r.recordTransition(ce, old, cond)
	return nil
}

// recordTransition records an Event when the condition enters a state an
// admin should notice: a conflict, an invalid mode, or a new mode.
func (r *Reconciler) recordTransition(ce *ocv1.ClusterExtension, old *metav1.Condition, cond metav1.Condition) {
	switch cond.Reason {
	case oriav1alpha1.ReasonConflict:
		r.Recorder.Eventf(ce, nil, corev1.EventTypeWarning, EventConflict, "Reconcile", "%s", cond.Message)
	case oriav1alpha1.ReasonInvalidMode:
		if old == nil || old.Reason != cond.Reason {
			r.Recorder.Eventf(ce, nil, corev1.EventTypeWarning, EventInvalidMode, "Reconcile", "%s", cond.Message)
		}
	case oriav1alpha1.ReasonLegacy, oriav1alpha1.ReasonFineGrained, oriav1alpha1.ReasonUnmanaged:
		if old == nil || old.Reason != cond.Reason {
			from := "(none)"
			if old != nil {
				from = old.Reason
			}
			r.Recorder.Eventf(ce, nil, corev1.EventTypeNormal, EventModeChanged, "Reconcile",
				"RBAC mode is now %s (condition was %s)", cond.Reason, from)
		}
	}
}
