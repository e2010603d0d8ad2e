package scopeinstance

import (
	"context"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/status"
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

// Now is the clock the windows are judged by (reconciler.Clock: the
// requeue at a window's instant is measured by it too).
func (r *Reconciler) Now() time.Time { return r.opts.Now() }

// binds reports whether a reconcile of spec at phase gathers everything
// and binds: inside the window, or, for a gated instance, before it (its
// bindings are made then, to its empty gate: gate.go).
func binds(spec oriav1alpha1.ScopeInstanceSpec, phase binding.Phase) bool {
	return phase == binding.WindowOpen || (phase == binding.WindowPending && binding.Gated(spec))
}

// Gather judges the instance's window at this instant, then reads what the
// reconcile needs: when it binds everything (gather), otherwise only the
// bindings to delete (closedPlan).
func (r *Reconciler) Gather(ctx context.Context, si *oriav1alpha1.ScopeInstance) (*plan, error) {
	now := r.Now()
	w := binding.InstanceWindow(si.Spec)
	phase, _ := w.At(now)
	var p *plan
	var err error
	if binds(si.Spec, phase) {
		p, err = r.gather(ctx, si, phase == binding.WindowOpen)
	} else {
		p, err = r.closedPlan(ctx, si, phase)
	}
	if p != nil {
		p.now, p.window, p.phase, p.priority = now, w, phase, instantPriority(si.Spec)
	}
	return p, err
}

// instantPriority is the priority of the requeue at the next instant of an
// instance's window, over routine work (0): 3 for a gated grant, whose
// instant is one write (gate.go), 2 for a small grant, 1 for another
// fan-out.
// Of the grants starting or expiring together, the small ones, each one
// quick reconcile, go first: a fan-out's writes (64 at a time) started
// first slow every one of them down, and take no less time themselves,
// the API server's work at the instant being the same (benchmarks.md,
// expiry).
func instantPriority(spec oriav1alpha1.ScopeInstanceSpec) int {
	if binding.Gated(spec) {
		return 3
	}
	if binding.FanOut(spec) {
		return 1
	}
	return 2
}

// closedPlan is the plan of an instance outside its window: every binding
// it has goes. While it is pending, the listed namespaces are pinned as
// usual (status.namespaceUIDs): the window opens on the namespaces the spec
// was admitted for.
func (r *Reconciler) closedPlan(ctx context.Context, si *oriav1alpha1.ScopeInstance, phase binding.Phase) (*plan, error) {
	rp := &revokePlan{cluster: binding.IsClusterWide(si.Spec), ceiling: si.Spec.ServiceAccount != nil}
	p := &plan{recheck: r.recheck(), pins: si.Status.NamespaceUIDs, pinnedFor: si.Status.PinnedFor, revoke: rp}
	if phase == binding.WindowPending && !rp.cluster {
		nss, err := r.namespaces(ctx)
		if err != nil {
			return nil, err
		}
		p.pins, _ = binding.PinNamespaces(si.Spec.Namespaces, nss, si.Status.NamespaceUIDs, binding.Repin(si))
		p.pinnedFor = binding.PinKey(si.Spec)
	}
	var err error
	if rp.rbs, rp.crbs, err = r.existingBindings(si.Name); err != nil {
		return nil, err
	}
	if rp.gate, err = r.closedGate(ctx, si); err != nil {
		return nil, err
	}
	return p, nil
}

// revokeAll deletes, as oria, every binding of p.revoke (with oria's own
// rights, whatever the ceiling: taking access away needs none; nothing is
// asked or read first), in parallel, and returns what it did.
func (r *Reconciler) revokeAll(ctx context.Context, p *revokePlan) (rbs, crbs []engine.Outcome) {
	w := r.writer()
	return engine.Delete(ctx, w, engine.RoleBindingKind.Name, p.rbs), engine.Delete(ctx, w, engine.ClusterRoleBindingKind.Name, p.crbs)
}

// writeClosed empties the instance's gate, if it has one, and deletes every
// binding of an instance outside its window (revokeAll), then the gate;
// then publishes the list of what is left bound (none
// of the instance's namespaces). At the expiry, the AccessExpired event
// says how many bindings went; otherwise BindingsDeleted does.
func (r *Reconciler) writeClosed(ctx context.Context, si *oriav1alpha1.ScopeInstance, p *plan) (result, error) {
	var emptied []engine.Outcome
	if g := p.revoke.gate; g != nil {
		emptied = r.emptyGates(ctx, []*rbacv1.ClusterRole{g.cur})
		if len(emptied) > 0 && len(engine.Summarize(emptied).Errors) == 0 {
			// The grant ended with that write. Its bindings, which grant
			// nothing now, are deleted by the next reconcile (again), at
			// routine priority: after the other grants' work at the same
			// instant.
			res := result{summary: engine.Summarize(emptied), emptied: g.cur.Name, left: len(p.revoke.rbs) + len(p.revoke.crbs), again: true}
			res.published = r.publisher().Publish(ctx, si, false, nil, false)
			r.recordWindow(ctx, si, p, res)
			return res, res.err()
		}
	}
	rbs, crbs := r.revokeAll(ctx, p.revoke)
	res := result{summary: engine.Summarize(rbs, crbs, emptied, r.deleteGate(ctx, p.revoke.gate, rbs)), revoked: len(rbs) + len(crbs)}
	res.published = r.publisher().Publish(ctx, si, false, nil, false)
	if !r.recordWindow(ctx, si, p, res) {
		r.recordEvents(si, nil, nil, rbs, crbs, nil)
	}
	return res, res.err()
}

// closedStatus is computeStatus outside the window: nothing is bound;
// Ready is False, Pending or Expired (neither is an error), unless the
// deletions failed.
func closedStatus(st *oriav1alpha1.ScopeInstanceStatus, p *plan, res result, err error, ready status.Ready) {
	st.Scope = oriav1alpha1.ScopeNamespaces
	if (p.revoke != nil && p.revoke.cluster) || (p.bind != nil && p.bind.targets.Cluster) {
		st.Scope = oriav1alpha1.ScopeCluster
	}
	st.BoundNamespaces, st.BoundNamespaceCount, st.PartiallyBoundNamespaceCount = nil, 0, 0
	st.Publication = res.published.Status
	st.NamespaceUIDs, st.PinnedFor = p.pins, p.pinnedFor
	switch {
	case err != nil:
		ready(metav1.ConditionUnknown, oriav1alpha1.ReasonReconcileError, err.Error())
	case len(res.conflicts) > 0:
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonConflict,
			status.Enumerate(res.conflicts, 5)+"; oria leaves such objects alone: remove or rename them")
	case p.revoke != nil && p.revoke.specErr != nil:
		// A gated grant before its window reads its spec (gate.go).
		ready(metav1.ConditionFalse, p.revoke.specErr.Reason, fmt.Sprintf("%s (the grant is time-bound, %s: nothing is granted before spec.notBefore)",
			p.revoke.specErr.Message, p.window.Describe(p.now)))
	case p.phase == binding.WindowPending && p.bind != nil && p.bind.gate != nil && p.bind.gate.want != nil:
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonPending, fmt.Sprintf(
			"the grant is time-bound, %s: nothing is granted before spec.notBefore; its bindings are made in %d namespace(s) to ClusterRole %q, "+
				"which holds no rule until then and every rule of its %d role(s) from then on", p.window.Describe(p.now), len(p.bind.targets.Namespaces),
			p.bind.gate.want.Name, len(p.bind.roles)))
	case p.phase == binding.WindowPending:
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonPending, fmt.Sprintf(
			"the grant is time-bound, %s: nothing is bound before spec.notBefore", p.window.Describe(p.now)))
	default:
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonExpired, fmt.Sprintf(
			"the grant %s (spec.expiresAt): its bindings are deleted and it grants nothing; the object stays as the record of the grant (to grant again, move spec.expiresAt later, on its RBACPolicy if it is compiled from one)",
			p.window.Describe(p.now)))
	}
}

// windowNote is what a Bound message adds for a time-bound grant: the gate
// it binds, if any, when it ends and how long is left ("" for none).
func windowNote(p *plan) string {
	var note string
	if p.bind != nil && p.bind.gate != nil && p.bind.gate.want != nil {
		note = fmt.Sprintf(" (through ClusterRole %q, the grant's gate)", p.bind.gate.want.Name)
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
