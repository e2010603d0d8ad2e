package rbacpolicy

import (
	"time"

	"github.com/operator-framework/oria/internal/binding"
)

// Time-bound policies (spec.notBefore, spec.expiresAt). A policy is
// compiled whatever its window: the compiled ScopeInstance carries the
// window (policy.Compile) and its controller grants only inside it, so the
// policy's status mirrors the instance's Pending, Bound (with the time
// left) and Expired. A policy that compiles to nothing (its extension is
// gone, say) says Expired once its window has passed.

func (r *Reconciler) now() time.Time { return r.opts.Now() }

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
