package accessrequest

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/eligibility"
	"github.com/operator-framework/oria/internal/reconciler"
	"github.com/operator-framework/oria/internal/record"
)

// Status sets the request's status (computeStatus).
func (r *Reconciler) Status(ar *oriav1alpha1.AccessRequest, p *plan, out result, err error) {
	ar.Status = computeStatus(ar, p, out, err)
}

// computeStatus is the request's status after a reconcile with plan p (nil
// when gathering failed), result out and error err: the assessment's state,
// who decided, the grant's bounds, and the Active condition (True while
// the grant is in force: Bound once every binding exists).
func computeStatus(ar *oriav1alpha1.AccessRequest, p *plan, out result, err error) oriav1alpha1.AccessRequestStatus {
	st := *ar.Status.DeepCopy()
	set := func(s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: oriav1alpha1.TypeActive, Status: s, Reason: reason, Message: msg,
			ObservedGeneration: ar.Generation})
	}
	if p == nil {
		set(metav1.ConditionUnknown, oriav1alpha1.ReasonReconcileError, err.Error())
		return st
	}
	st.ObservedGeneration = ar.Generation
	v := p.assessment
	st.State, st.ApprovedBy, st.DeniedBy, st.EndedBy = v.State, v.ApprovedBy, v.DeniedBy, v.EndedBy
	st.StartsAt, st.EndsAt, st.EndedAt = v.Start, v.End, v.EndedAt
	st.Namespaces, st.ScopeInstanceName = nil, ""
	if v.State != oriav1alpha1.StateActive {
		set(metav1.ConditionFalse, v.Reason, v.Message)
		return st
	}
	st.Namespaces = v.Namespaces
	switch {
	case err != nil:
		set(metav1.ConditionUnknown, oriav1alpha1.ReasonReconcileError, err.Error())
	case out.conflict != "":
		set(metav1.ConditionFalse, oriav1alpha1.ReasonConflict, out.conflict)
	case p.compiled.Template == nil && len(p.withheld) > 0:
		set(metav1.ConditionFalse, oriav1alpha1.ReasonConflict, v.Message+"; but nothing is bound: "+strings.Join(p.withheld, "; "))
	case p.compiled.Template == nil:
		set(metav1.ConditionFalse, oriav1alpha1.ReasonAPINotFound, v.Message+"; but the policy's extension provides none of its APIs, so nothing is bound")
	default:
		st.ScopeInstanceName = objectName(ar.Name)
		ready := instanceReady(out.instance)
		if ready != nil && ready.Status == metav1.ConditionTrue {
			msg := v.Message
			if len(p.withheld) > 0 {
				msg += "; not bound: " + strings.Join(p.withheld, "; ")
			}
			set(metav1.ConditionTrue, oriav1alpha1.ReasonBound, msg)
		} else {
			why := "the grant is being bound"
			if ready != nil {
				why = fmt.Sprintf("ScopeInstance %q: %s: %s", st.ScopeInstanceName, ready.Reason, ready.Message)
			}
			set(metav1.ConditionFalse, oriav1alpha1.ReasonApproved, v.Message+"; "+why)
		}
	}
	return st
}

func instanceReady(si *oriav1alpha1.ScopeInstance) *metav1.Condition {
	if si == nil {
		return nil
	}
	return meta.FindStatusCondition(si.Status.Conditions, oriav1alpha1.TypeReady)
}

// Patch writes the status when it changed, then names each transition of
// the request's state in an Event, with who made it.
func (r *Reconciler) Patch(ctx context.Context, before, after *oriav1alpha1.AccessRequest) (time.Duration, error) {
	hold, err := reconciler.StatusPatch(r.Client, func(o *oriav1alpha1.AccessRequest) any { return o.Status })(ctx, before, after)
	if err == nil && before.Status.State != after.Status.State && after.Status.State != "" {
		reason, note := transition(after)
		r.Recorder.Eventf(after, nil, corev1.EventTypeNormal, reason, "Assess", "%s", note)
	}
	return hold, err
}

// transition is the Event of a request that has just entered its state:
// its reason and note, naming who.
func transition(ar *oriav1alpha1.AccessRequest) (string, string) {
	st := ar.Status
	what := fmt.Sprintf("activation of RBACPolicy %q for %q in %v for %v", ar.Spec.PolicyName, ar.Spec.Requester, ar.Spec.Namespaces, ar.Spec.Duration.Duration)
	switch st.State {
	case oriav1alpha1.StateRequested:
		return oriav1alpha1.ReasonRequested, fmt.Sprintf("%q requested the %s: %s", ar.Spec.Requester, what, ar.Spec.Reason)
	case oriav1alpha1.StateActive:
		by := "self-activated (no approvers)"
		if rec := eligibility.Approval.Of(ar.Annotations); rec.By != "" {
			by = "approved " + rec.String()
		}
		return oriav1alpha1.ReasonApproved, fmt.Sprintf("%s %s; in force from %s until %s", what, by, stamp(st.StartsAt), stamp(st.EndsAt))
	case oriav1alpha1.StateDenied:
		return oriav1alpha1.ReasonDenied, fmt.Sprintf("%s denied %s", what, eligibility.Denial.Of(ar.Annotations))
	case oriav1alpha1.StateCancelled:
		return oriav1alpha1.ReasonCancelled, fmt.Sprintf("%s cancelled by %q: %s", what, st.EndedBy, conditionMessage(st))
	case oriav1alpha1.StateExpired:
		return oriav1alpha1.ReasonRequestExpired, fmt.Sprintf("%s expired: %s", what, conditionMessage(st))
	default:
		return oriav1alpha1.ReasonEnded, fmt.Sprintf("%s ended at %s by %q: %s", what, stamp(st.EndedAt), st.EndedBy, conditionMessage(st))
	}
}

func conditionMessage(st oriav1alpha1.AccessRequestStatus) string {
	if c := meta.FindStatusCondition(st.Conditions, oriav1alpha1.TypeActive); c != nil {
		return c.Message
	}
	return ""
}

func stamp(t *metav1.Time) string {
	if t == nil {
		return "-"
	}
	return record.Now(t.Time)
}
