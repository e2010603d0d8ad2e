package scopeinstance

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/operator-framework/oria/internal/binding"
)

// Time-bound grants. An instance with spec.notBefore or spec.expiresAt
// grants nothing outside [notBefore, expiresAt): it has no bindings, its
// Ready condition says Pending before the window and Expired after it. Each
// reconcile judges the window afresh from the spec and the time (never from
// memory or the status), and requeues itself for the next instant that
// changes it, so a restart, a new leader or an oria that was down across
// either instant ends in the same state: the first reconcile of an expired
// instance deletes its bindings before it writes anything else. Expiry wins
// over everything else that may be wrong with the instance (a missing
// template, a spec error, a pending ceiling check): outside the window none
// of that is even read.

// DefaultExpiryWarning is the default lead time of the AccessExpiring Event
// (the manager's --expiry-warning).
const DefaultExpiryWarning = 15 * time.Minute

// Event reasons of time-bound grants (Normal events, each naming the
// subjects; also recorded on the RBACPolicy an instance is compiled from).
const (
	// EventAccessGranted: the window opened (or the instance was created
	// inside it).
	EventAccessGranted = "AccessGranted"
	// EventAccessExpiring: expiresAt is within the expiry warning.
	EventAccessExpiring = "AccessExpiring"
	// EventAccessExpired: expiresAt passed; the bindings were deleted.
	EventAccessExpired = "AccessExpired"
)

// postponeSpan is how long after its window's instant a reconcile that
// changed access leaves its status to the next reconcile (postponesStatus).
const postponeSpan = time.Second

// postponesStatus reports whether the reconcile of plan p leaves its
// status to the next one, which runs at once at routine priority: it ran
// without error within postponeSpan after the instant its window last
// changed phase (notBefore, once open; expiresAt, once expired), and its
// writes changed access. Every grant changing at one instant then makes its
// access-changing writes before any of them writes its status: a status
// write costs the API server as much as a binding's, and on a small control
// plane a hundred of them at the instant put the last grant's revocation
// past the second (docs/benchmarks.md, expiry). The status lags the access
// it reports by that instant's work; it never says a grant ended before it
// did. The next reconcile writes no binding, so it does not postpone again,
// and past postponeSpan nothing is postponed.
func postponesStatus(p *plan, res result, err error) bool {
	if err != nil || p == nil || !res.summary.Wrote() {
		return false
	}
	var edge *metav1.Time
	switch p.phase {
	case binding.WindowOpen:
		edge = p.window.NotBefore
	case binding.WindowExpired:
		edge = p.window.ExpiresAt
	}
	return edge != nil && !p.now.Before(edge.Time) && p.now.Sub(edge.Time) < postponeSpan
}

// Now is the clock the windows are judged by (reconciler.Clock: the
// requeue at a window's instant is measured by it too).
func (r *Reconciler) Now() time.Time { return r.opts.Now() }

// windowNote is what a Bound message adds for a time-bound grant: the gate
// it binds, if any, when it ends and how long is left ("" for none).
func windowNote(p *plan) string {
	var note string
	if p.gate.wanted() {
		note = fmt.Sprintf(" (through ClusterRole %q, the grant's gate)", p.gate.want.Name)
	}
	if p.window.ExpiresAt == nil {
		return note
	}
	return note + ", " + p.window.Describe(p.now)
}

// windowInstant returns the instant to look again at for the window's
// sake, with that requeue's priority: the next instant that changes its
// phase (instantPriority), or, at routine priority, the expiry warning
// before expiresAt; zero when nothing lies ahead.
func (r *Reconciler) windowInstant(p *plan) (at time.Time, priority int) {
	if p == nil || !p.window.Bounded() {
		return time.Time{}, 0
	}
	phase, next := p.window.At(p.now)
	if next == 0 {
		return time.Time{}, 0
	}
	if lead := r.opts.ExpiryWarning; phase == binding.WindowOpen && lead > 0 {
		if warn := next - lead; warn > 0 {
			return p.now.Add(warn), 0
		}
	}
	return p.now.Add(next), p.priority
}
