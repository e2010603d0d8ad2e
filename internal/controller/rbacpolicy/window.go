package rbacpolicy

import (
	"context"
	"fmt"
	"time"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
)

// Time-bound policies (spec.notBefore, spec.expiresAt). A policy is
// compiled whatever its window: the compiled ScopeInstance carries the
// window (policy.Compile) and its controller grants only inside it, so the
// policy's status mirrors the instance's Pending, Bound (with the time
// left) and Expired. A policy that compiles to nothing (its extension is
// gone, say) says Expired once its window has passed.

func (r *Reconciler) now() time.Time { return r.opts.Now() }

// Gather judges the policy's window at this instant, for its status, and
// decides what to do with its compiled objects (gather).
func (r *Reconciler) Gather(ctx context.Context, policy *oriav1alpha1.RBACPolicy) (*plan, error) {
	now := r.now()
	var p *plan
	var err error
	if w := binding.PolicyWindow(policy.Spec); policy.Spec.Eligibility != nil {
		p = eligible(policy)
	} else if w.Empty() {
		p = neverOpens(w.Whole())
	} else {
		p, err = r.gather(ctx, policy)
	}
	if p != nil {
		p.now, p.window = now, binding.PolicyWindow(policy.Spec).Whole()
		p.phase, _ = p.window.At(now)
	}
	return p, err
}

// neverOpens is the plan of a policy whose window is empty in whole
// seconds (w, as compiled): a window inside one second, or one the rounding
// inverts, stored before the API server refused it. It grants nothing at
// any instant, so nothing is compiled and what was is revoked (fail
// closed: the current spec allows nothing); the policy says Pending until
// its expiresAt, then Expired (at which it looks again, windowRequeue),
// never an error retried for ever.
func neverOpens(w binding.Window) *plan {
	return &plan{decision: decisionRevoke, reason: oriav1alpha1.ReasonPending, message: fmt.Sprintf(
		"spec.notBefore and spec.expiresAt leave no whole second between them: as oria applies them (notBefore rounded up, expiresAt down) "+
			"the window is from %s until %s, so it never opens and nothing is granted; Expired from spec.expiresAt on",
		binding.Stamp(w.NotBefore), binding.Stamp(w.ExpiresAt))}
}

// eligible is the plan of a policy whose subjects are eligible rather
// than granted (spec.eligibility): it binds nothing by itself, so whatever
// it compiled before is revoked; each approved AccessRequest carries its
// own time-bound grant (package accessrequest).
func eligible(policy *oriav1alpha1.RBACPolicy) *plan {
	return &plan{decision: decisionRevoke, reason: oriav1alpha1.ReasonEligible, message: fmt.Sprintf(
		"the policy's subjects are eligible, not granted: it binds nothing by itself; each subject activates it for at most %v with an AccessRequest (kubectl oria request)",
		policy.Spec.Eligibility.MaxDuration.Duration)}
}

// windowNote is what a Bound message adds for a time-bound policy: when it
// ends and how long is left ("" without an end).
func windowNote(p *plan) string {
	if p.window.ExpiresAt == nil {
		return ""
	}
	return ", " + p.window.Describe(p.now)
}

// windowRequeue returns when a policy that compiles to nothing (it grants
// nothing; no instance reports on its window) looks again to say Expired:
// at its expiresAt. A compiled policy follows its instance's status.
func (r *Reconciler) windowRequeue(p *plan) time.Duration {
	if p.decision != decisionRevoke || p.window.ExpiresAt == nil || p.phase == binding.WindowExpired {
		return 0
	}
	return max(p.window.ExpiresAt.Sub(r.now()), time.Millisecond)
}
