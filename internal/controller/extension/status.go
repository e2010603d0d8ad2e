package extension

import (
	"context"
	"fmt"
	"strings"

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

// maxTooBroadInMessage bounds the too-broad bundle roles the condition
// describes (each description quotes up to three rules; a condition message
// holds at most 32 KiB).
const maxTooBroadInMessage = 5

// maxTooBroadMessage bounds a message that describes bundle roles (their
// rules can be long).
const maxTooBroadMessage = 8192

// conditionFor computes the RBACManaged condition of a reconcile from its
// plan, the outcome of its writes and its error (a failure worth a retry).
// It is pure: the same inputs give the same condition.
func conditionFor(p *plan, out outcome, err error) metav1.Condition {
	switch {
	case err != nil:
		return metav1.Condition{
			Status:  metav1.ConditionUnknown,
			Reason:  oriav1alpha1.ReasonReconcileError,
			Message: "oria could not reconcile the ClusterRoles of this extension and retries: " + shorten(err.Error()),
		}
	case !p.valid:
		// A typo must not strip access from every user of the extension:
		// the plan keeps whatever the last valid mode generated.
		return metav1.Condition{
			Status: metav1.ConditionFalse,
			Reason: oriav1alpha1.ReasonInvalidMode,
			Message: fmt.Sprintf("annotation %s has the invalid value %q (valid: %s); nothing was changed and ClusterRoles generated earlier are kept",
				oriav1alpha1.AnnotationRBACMode, p.annotation, oriav1alpha1.RBACModeNames()),
		}
	case p.mode == oriav1alpha1.RBACModeUnmanaged:
		msg := fmt.Sprintf("RBAC for this extension's APIs is not managed by oria; grant access manually or set the annotation %s to Legacy or FineGrained",
			oriav1alpha1.AnnotationRBACMode)
		if !p.annotated {
			msg += " (the annotation is not set, and oria's default mode is Unmanaged)"
		}
		return metav1.Condition{Status: metav1.ConditionFalse, Reason: oriav1alpha1.ReasonUnmanaged, Message: msg}
	}
	var b strings.Builder
	switch {
	case len(out.conflicts) > 0 || len(p.tooBroad) > 0:
		var parts []string
		if len(out.conflicts) > 0 {
			parts = append(parts, joinSentences(out.conflicts)+". These roles are left alone; delete or rename them and oria generates its own")
		}
		if len(p.tooBroad) > 0 {
			shown := p.tooBroad[:min(len(p.tooBroad), maxTooBroadInMessage)]
			for _, why := range shown {
				parts = append(parts, upperFirst(why))
			}
			if more := len(p.tooBroad) - len(shown); more > 0 {
				parts = append(parts, fmt.Sprintf("And %d more bundle-provided ClusterRole(s) reach beyond the extension's own APIs", more))
			}
			parts = append(parts, "oria grants these roles nowhere (no aggregation label in Legacy mode, no binding from RBACPolicy objects) until the bundle narrows their rules to the extension's APIs")
		}
		fmt.Fprintf(&b, "%s. The extension's other ClusterRoles are in place (mode %s)", strings.Join(parts, ". "), p.mode)
	case len(p.crds) == 0:
		b.WriteString("The extension provides no APIs yet (no CustomResourceDefinitions labelled for it); nothing to generate")
	case p.mode == oriav1alpha1.RBACModeLegacy:
		fmt.Fprintf(&b, "ClusterRoles for %d API(s) are in place and aggregated to the built-in admin, edit and view ClusterRoles", len(p.crds))
		if len(p.clusterScoped) > 0 {
			fmt.Fprintf(&b, ". Cluster-scoped: %s; these reach users only through ClusterRoleBindings to view, edit or admin (a RoleBinding to those roles grants nothing on a cluster-scoped API)",
				strings.Join(p.clusterScoped, ", "))
		}
	default:
		fmt.Fprintf(&b, "ClusterRoles for %d API(s) are in place, without aggregation; grant them with RBACPolicy objects", len(p.crds))
	}
	if len(out.bundle) > 0 {
		fmt.Fprintf(&b, ". Provided by the bundle (used instead of generated roles): %s", strings.Join(out.bundle, ", "))
	}
	// A role left alone or granted nowhere is access the mode promises and
	// users do not get: False, though the other roles are in place. A
	// conflict is named first (it has a fix in the cluster; a broad bundle
	// role needs a new bundle); the message names both.
	if len(out.conflicts) > 0 {
		return metav1.Condition{Status: metav1.ConditionFalse, Reason: oriav1alpha1.ReasonConflict, Message: clip(b.String(), maxTooBroadMessage)}
	}
	if len(p.tooBroad) > 0 {
		return metav1.Condition{Status: metav1.ConditionFalse, Reason: oriav1alpha1.ReasonBundleRoleTooBroad, Message: clip(b.String(), maxTooBroadMessage)}
	}
	reason := oriav1alpha1.ReasonLegacy
	if p.mode == oriav1alpha1.RBACModeFineGrained {
		reason = oriav1alpha1.ReasonFineGrained
	}
	return metav1.Condition{Status: metav1.ConditionTrue, Reason: reason, Message: b.String()}
}

// setCondition puts the RBACManaged condition cond on ce's status (in
// memory); meta.SetStatusCondition keeps its transition time when its
// status did not change.
func setCondition(ce *ocv1.ClusterExtension, cond metav1.Condition) {
	cond.Type = oriav1alpha1.TypeRBACManaged
	cond.ObservedGeneration = ce.Generation
	cond.LastTransitionTime = metav1.Time{}
	meta.SetStatusCondition(&ce.Status.Conditions, cond)
}

// patchCondition writes oria's RBACManaged condition of after when it
// differs from before's, and records an Event for notable transitions.
//
// The ClusterExtension's status belongs to operator-controller, which writes
// its own conditions with GET + Update. oria therefore never updates the
// status: it server-side applies a status holding only its own condition,
// with its own field owner. status.conditions is a list-map keyed by type,
// so the apply merges oria's entry into the list and owns only that entry;
// operator-controller's Updates carry oria's entry along unchanged (and the
// API server keeps oria as its owner), so neither erases the other.
func (r *Reconciler) patchCondition(ctx context.Context, before, ce *ocv1.ClusterExtension) error {
	old := meta.FindStatusCondition(before.Status.Conditions, oriav1alpha1.TypeRBACManaged)
	cond := *meta.FindStatusCondition(ce.Status.Conditions, oriav1alpha1.TypeRBACManaged)
	if old != nil && old.Status == cond.Status && old.Reason == cond.Reason &&
		old.Message == cond.Message && old.ObservedGeneration == cond.ObservedGeneration {
		return nil
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
// admin should notice: a conflict, a bundle role too broad to grant, an
// invalid mode, or a new mode.
func (r *Reconciler) recordTransition(ce *ocv1.ClusterExtension, old *metav1.Condition, cond metav1.Condition) {
	switch cond.Reason {
	case oriav1alpha1.ReasonConflict:
		r.Recorder.Eventf(ce, nil, corev1.EventTypeWarning, EventConflict, "Reconcile", "%s", cond.Message)
	case oriav1alpha1.ReasonBundleRoleTooBroad:
		r.Recorder.Eventf(ce, nil, corev1.EventTypeWarning, EventTooBroad, "Reconcile", "%s", cond.Message)
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
