package eligibility

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/record"
)

// ByOria is who ended an activation that its time, or its policy, ended.
const ByOria = "oria"

// Assessment is what a request is now (Assess).
type Assessment struct {
	State oriav1alpha1.RequestState
	// Reason and Message are the Active condition's.
	Reason, Message string
	// ApprovedBy, DeniedBy and EndedBy name who decided.
	ApprovedBy, DeniedBy, EndedBy string
	// Start and End bound the grant (whole seconds; nil before approval);
	// EndedAt is when it ended (nil while it has not).
	Start, End, EndedAt *metav1.Time
	// Namespaces are where the grant is in force (Active only).
	Namespaces []string
	// Next is when the assessment changes by time alone (zero: never).
	Next time.Time
}

// Final reports whether state never changes again.
func Final(state oriav1alpha1.RequestState) bool {
	return state != "" && state != oriav1alpha1.StateRequested && state != oriav1alpha1.StateActive
}

// Assess returns what request r is at now, given its policy p (nil when
// gone). A final state recorded in r's status (written by oria alone) is
// kept: a decided request never changes again. The records of decisions
// are the annotations the guard admitted (Admit).
func Assess(r *oriav1alpha1.AccessRequest, p *oriav1alpha1.RBACPolicy, now time.Time) Assessment {
	prev := r.Status
	if Final(prev.State) {
		return Assessment{State: prev.State, Reason: reasonOf(r), Message: messageOf(r), ApprovedBy: prev.ApprovedBy, DeniedBy: prev.DeniedBy,
			EndedBy: prev.EndedBy, Start: prev.StartsAt, End: prev.EndsAt, EndedAt: prev.EndedAt}
	}
	ann := r.Annotations
	if d := Denial.Of(ann); d.By != "" {
		return Assessment{State: oriav1alpha1.StateDenied, Reason: oriav1alpha1.ReasonDenied, DeniedBy: d.By, EndedAt: at(d, now),
			Message: "denied " + d.String()}
	}
	v := Assessment{}
	approval := Approval.Of(ann)
	switch {
	case approval.By != "":
		v.ApprovedBy = approval.By
		v.Start = at(approval, r.CreationTimestamp.Time)
	case prev.State == oriav1alpha1.StateActive && prev.StartsAt != nil:
		// Self-activated earlier (the policy then had no approvers).
		v.Start = prev.StartsAt
	case p != nil && SelfActivated(p):
		v.Start = oriav1alpha1.WholeSecond(&metav1.Time{Time: r.CreationTimestamp.Time}, true)
	}
	if v.Start != nil {
		end := v.Start.Add(r.Spec.Duration.Duration)
		if p != nil && p.Spec.Eligibility != nil {
			end = minTime(end, v.Start.Add(p.Spec.Eligibility.MaxDuration.Duration))
		}
		v.End = &metav1.Time{Time: oriav1alpha1.ClampInstant(end.Truncate(time.Second))}
	}
	if e := End.Of(ann); e.By != "" {
		v.EndedBy, v.EndedAt = e.By, at(e, now)
		if v.Start == nil {
			v.State, v.Reason, v.Message = oriav1alpha1.StateCancelled, oriav1alpha1.ReasonCancelled, "cancelled "+e.String()
			return v
		}
		v.State, v.Reason, v.Message = oriav1alpha1.StateEnded, oriav1alpha1.ReasonEnded, "ended early "+e.String()
		return v
	}
	if v.Start == nil {
		return pending(r, p, now, prev)
	}
	if why := disallowed(r, p); why != "" {
		v.State, v.Reason, v.Message = oriav1alpha1.StateEnded, oriav1alpha1.ReasonEnded, why
		v.EndedBy, v.EndedAt = ByOria, endedAt(prev, now)
		if v.EndedAt.After(v.End.Time) {
			v.EndedAt = v.End
		}
		return v
	}
	if !now.Before(v.End.Time) {
		v.State, v.Reason, v.EndedBy, v.EndedAt = oriav1alpha1.StateEnded, oriav1alpha1.ReasonEnded, ByOria, v.End
		v.Message = fmt.Sprintf("its time is up: the grant ran from %s to %s", record.Now(v.Start.Time), record.Now(v.End.Time))
		return v
	}
	v.State, v.Reason, v.Namespaces, v.Next = oriav1alpha1.StateActive, oriav1alpha1.ReasonApproved, Namespaces(p, r.Spec.Namespaces), v.End.Time
	if v.ApprovedBy != "" {
		v.Message = fmt.Sprintf("approved %s; in force until %s", approval, record.Now(v.End.Time))
	} else {
		v.Message = fmt.Sprintf("self-activated (the policy has no approvers); in force until %s", record.Now(v.End.Time))
	}
	return v
}

// pending assesses a request without a decision.
func pending(r *oriav1alpha1.AccessRequest, p *oriav1alpha1.RBACPolicy, now time.Time, prev oriav1alpha1.AccessRequestStatus) Assessment {
	if why := disallowed(r, p); why != "" {
		return Assessment{State: oriav1alpha1.StateCancelled, Reason: oriav1alpha1.ReasonCancelled, Message: why, EndedBy: ByOria, EndedAt: endedAt(prev, now)}
	}
	deadline := r.CreationTimestamp.Add(RequestTimeout(p)).Truncate(time.Second)
	if !now.Before(deadline) {
		return Assessment{State: oriav1alpha1.StateExpired, Reason: oriav1alpha1.ReasonRequestExpired, EndedBy: ByOria, EndedAt: &metav1.Time{Time: deadline},
			Message: fmt.Sprintf("not approved within %v (the policy's requestTimeout)", RequestTimeout(p))}
	}
	return Assessment{State: oriav1alpha1.StateRequested, Reason: oriav1alpha1.ReasonRequested, Next: deadline,
		Message: fmt.Sprintf("waiting for an approver of RBACPolicy %q until %s", r.Spec.PolicyName, record.Now(deadline))}
}

// disallowed says why the policy no longer allows the request, if it does
// not: gone, not eligible, the requester's subject no longer listed, none
// of the namespaces left.
func disallowed(r *oriav1alpha1.AccessRequest, p *oriav1alpha1.RBACPolicy) string {
	switch {
	case p == nil:
		return fmt.Sprintf("RBACPolicy %q is gone", r.Spec.PolicyName)
	case p.Spec.Eligibility == nil:
		return fmt.Sprintf("RBACPolicy %q no longer makes its subjects eligible", p.Name)
	case !Lists(p, EligibleAs(r)):
		s := EligibleAs(r)
		return fmt.Sprintf("RBACPolicy %q no longer lists %s %q", p.Name, s.Kind, s.Name)
	case len(Namespaces(p, r.Spec.Namespaces)) == 0:
		return fmt.Sprintf("RBACPolicy %q no longer allows any of the requested namespaces", p.Name)
	}
	return ""
}

// at is when record rec was made (its "-at"), or def when it does not say.
func at(rec record.Record, def time.Time) *metav1.Time {
	t, err := time.Parse(time.RFC3339, rec.At)
	if err != nil {
		t = def
	}
	return oriav1alpha1.WholeSecond(&metav1.Time{Time: t}, true)
}

// endedAt keeps the end recorded in status, else now.
func endedAt(prev oriav1alpha1.AccessRequestStatus, now time.Time) *metav1.Time {
	if prev.EndedAt != nil {
		return prev.EndedAt
	}
	return &metav1.Time{Time: now.UTC().Truncate(time.Second)}
}

func reasonOf(r *oriav1alpha1.AccessRequest) string {
	for _, c := range r.Status.Conditions {
		if c.Type == oriav1alpha1.TypeActive {
			return c.Reason
		}
	}
	return string(r.Status.State)
}

func messageOf(r *oriav1alpha1.AccessRequest) string {
	for _, c := range r.Status.Conditions {
		if c.Type == oriav1alpha1.TypeActive {
			return c.Message
		}
	}
	return ""
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
