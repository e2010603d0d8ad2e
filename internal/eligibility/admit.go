package eligibility

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/record"
)

// AdmitCreate returns why user may not create request r for policy p (nil
// when p does not exist), at now; none when they may. It applies to every
// requester, admins included: the requester is the authenticated creator,
// eligible through a subject of the policy, and asks within its limits.
func AdmitCreate(p *oriav1alpha1.RBACPolicy, r *oriav1alpha1.AccessRequest, u User) []string {
	var out []string
	if r.Spec.Requester != u.Name {
		out = append(out, fmt.Sprintf("spec.requester says %q, but the request is made by %q: the requester is who creates the request, as the API server authenticated them",
			r.Spec.Requester, u.Name))
	}
	for _, k := range Decisions {
		if rec := k.Of(r.Annotations); !rec.Empty() {
			out = append(out, fmt.Sprintf("a request is created undecided: annotation %s (the %s) is written later, by whoever decides", k.By, k.What))
		}
	}
	if p == nil {
		return append(out, fmt.Sprintf("RBACPolicy %q does not exist", r.Spec.PolicyName))
	}
	e := p.Spec.Eligibility
	if e == nil {
		return append(out, fmt.Sprintf("RBACPolicy %q makes no one eligible (it has no spec.eligibility): its subjects have its access already, or ask an admin", p.Name))
	}
	as := EligibleAs(r)
	switch {
	case !u.Is(as):
		out = append(out, fmt.Sprintf("spec.eligibleAs names %s %q, but user %q is not %s (groups: %s)", as.Kind, as.Name, u.Name, as.Kind, strings.Join(u.Groups, ", ")))
	case !Lists(p, as):
		out = append(out, fmt.Sprintf("user %q is not eligible for RBACPolicy %q: it does not list %s %q (set spec.eligibleAs to the policy's subject you are eligible through)",
			u.Name, p.Name, as.Kind, as.Name))
	}
	switch d := r.Spec.Duration.Duration; {
	case d <= 0:
		out = append(out, fmt.Sprintf("spec.duration must be more than zero (it is %v)", d))
	case d > e.MaxDuration.Duration:
		out = append(out, fmt.Sprintf("spec.duration %v is more than RBACPolicy %q allows (eligibility.maxDuration %v)", d, p.Name, e.MaxDuration.Duration))
	case d%time.Second != 0:
		out = append(out, fmt.Sprintf("spec.duration %v is not in whole seconds", d))
	}
	if allowed := Namespaces(p, r.Spec.Namespaces); len(allowed) != len(dedup(r.Spec.Namespaces)) {
		out = append(out, fmt.Sprintf("spec.namespaces %s: RBACPolicy %q grants only in %s",
			strings.Join(outside(r.Spec.Namespaces, allowed), ", "), p.Name, strings.Join(p.Spec.Namespaces, ", ")))
	}
	if strings.TrimSpace(r.Spec.Reason) == "" && (e.RequireReason || SelfActivated(p)) {
		out = append(out, fmt.Sprintf("spec.reason is required by RBACPolicy %q (it %s)", p.Name,
			map[bool]string{true: "has no approvers: a self-activation says why", false: "says eligibility.requireReason"}[SelfActivated(p)]))
	}
	return out
}

// AdmitUpdate returns why user u may not make the update of request old to
// r at now, for policy p (nil when gone); admin says whether u may do
// everything (then u may end any request). The spec never changes; each
// decision's record is written once, whole, by its author and never
// changed: an approval or a denial by an approver of the policy who is not
// the requester, while the request waits; an end (a cancellation, or an
// early end) by the requester, an approver or an admin, while it waits or
// is active.
func AdmitUpdate(p *oriav1alpha1.RBACPolicy, old, r *oriav1alpha1.AccessRequest, u User, admin bool, now time.Time) []string {
	var out []string
	if !equality.Semantic.DeepEqual(old.Spec, r.Spec) {
		out = append(out, "an AccessRequest is one immutable record: its spec is never changed (a new activation is a new request)")
	}
	state := Assess(old, p, now).State
	for _, k := range Decisions {
		before, after := k.Of(old.Annotations), k.Of(r.Annotations)
		if before == after {
			continue
		}
		if !before.Empty() {
			out = append(out, fmt.Sprintf("the %s is on record (%s) and is never changed or removed", k.What, before))
			continue
		}
		out = append(out, authored(k, after, u.Name, now)...)
		out = append(out, mayDecide(k, p, old, u, admin, state, after)...)
	}
	return out
}

// mayDecide says why u may not write decision k on request old, which is
// in state now.
func mayDecide(k record.Keys, p *oriav1alpha1.RBACPolicy, old *oriav1alpha1.AccessRequest, u User, admin bool, state oriav1alpha1.RequestState, rec record.Record) []string {
	self := u.Name == old.Spec.Requester
	switch k {
	case Approval, Denial:
		var out []string
		if state != oriav1alpha1.StateRequested {
			out = append(out, fmt.Sprintf("request %q is %s, not waiting for a decision: only a Requested request is approved or denied", old.Name, state))
		}
		switch {
		case self:
			out = append(out, fmt.Sprintf("user %q made this request and may not decide on it: someone else approves (two persons), even a member of the approvers", u.Name))
		case p == nil || !Approver(p, u):
			out = append(out, fmt.Sprintf("user %q is not an approver of RBACPolicy %q (eligibility.approvers)", u.Name, old.Spec.PolicyName))
		}
		if k == Denial && strings.TrimSpace(rec.Reason) == "" {
			out = append(out, fmt.Sprintf("a denial says why: set annotation %s", Denial.Reason))
		}
		return out
	default: // End
		var out []string
		if state != oriav1alpha1.StateRequested && state != oriav1alpha1.StateActive {
			out = append(out, fmt.Sprintf("request %q is %s already: only a Requested or Active request is cancelled or ended", old.Name, state))
		}
		if !self && !admin && (p == nil || !Approver(p, u)) {
			out = append(out, fmt.Sprintf("user %q may not end request %q: the requester, an approver of its policy or a cluster admin may", u.Name, old.Name))
		}
		return out
	}
}

// authored checks that rec, written by user at now, names user and now.
func authored(k record.Keys, rec record.Record, user string, now time.Time) []string {
	var out []string
	if rec.By == "" {
		out = append(out, fmt.Sprintf("the %s's record (annotations %s, %s, %s) is written whole: set %s to your own user name, %q", k.What, k.By, k.At, k.Reason, k.By, user))
	} else if rec.By != user {
		out = append(out, fmt.Sprintf("annotation %s says %q, but the request is made by %q: the %s's record names who made it, as the API server authenticated them", k.By, rec.By, user, k.What))
	}
	t, err := time.Parse(time.RFC3339, rec.At)
	switch {
	case rec.At == "":
		out = append(out, fmt.Sprintf("annotation %s must say when, RFC 3339 (now is %s)", k.At, record.Now(now)))
	case err != nil:
		out = append(out, fmt.Sprintf("annotation %s: %q is not an RFC 3339 time", k.At, rec.At))
	case t.Sub(now).Abs() > record.MaxSkew:
		out = append(out, fmt.Sprintf("annotation %s says %s, but the %s is made now, %s (at most %v apart)", k.At, rec.At, k.What, record.Now(now), record.MaxSkew))
	}
	return out
}

func dedup(s []string) map[string]bool {
	m := map[string]bool{}
	for _, x := range s {
		m[x] = true
	}
	return m
}

// outside returns the requested namespaces not in allowed.
func outside(requested, allowed []string) []string {
	ok := dedup(allowed)
	var out []string
	for ns := range dedup(requested) {
		if !ok[ns] {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return out
}
