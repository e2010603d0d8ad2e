package scopeinstance

import (
	"slices"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/ownership"
)

// action is what a reconcile does with an instance's bindings: one of
// three, decided by decide (decide.go) from the window and the spec.
type action int

const (
	// bindAll: inside the window (or a gated instance before it) with a
	// valid spec: the wanted bindings are written, the stale ones deleted.
	bindAll action = iota
	// revokeAll: outside the window: every binding goes, whatever else is
	// wrong with the instance.
	revokeAll
	// revokeOnly: a spec error: nothing new is written; the bindings the
	// current spec no longer allows, and those its ceiling no longer
	// allows, go (a revocation always lands).
	revokeOnly
)

// gateOp is what a reconcile does with the instance's gate, and when, in
// the order that never grants early and never leaves a gap (gate.go).
type gateOp int

const (
	// gateNone: no gate to write (none, or its name held by someone else).
	gateNone gateOp = iota
	// gateCreate: created first, then bound: a binding is never made to
	// a name no role holds.
	gateCreate
	// gateNarrow: written first, emptied (before notBefore) or narrowed
	// (a spec error), then the bindings follow.
	gateNarrow
	// gateFill: written after its bindings are in place, so that the grant
	// starts in every namespace with one write.
	gateFill
	// gateEnd: outside the window: emptied first, its bindings deleted,
	// then the gate.
	gateEnd
	// gateDelete: no longer gated: deleted last, after its bindings.
	gateDelete
)

// plan is what one reconcile decided (decide, from what Gather read): one
// shape for every action, run by Write in one order.
type plan struct {
	// recheck is how often the controller looks again at what it does not
	// watch (the configured interval), for the status messages.
	recheck time.Duration
	// now is the instant the window was judged at, phase where now lies in
	// it, priority the priority of the requeue at its next instant
	// (instantPriority).
	now      time.Time
	window   binding.Window
	phase    binding.Phase
	priority int
	// pins are the namespace UIDs to record (status.namespaceUIDs, see
	// binding.PinNamespaces), pinnedFor what they are recorded under
	// (status.pinnedFor, binding.PinKey).
	pins      map[string]string
	pinnedFor string

	action action
	// specErr is the spec error (revokeOnly).
	specErr *binding.SpecError
	// cluster: the instance binds cluster-wide (its status' scope);
	// hasCeiling: it names a ceiling ServiceAccount.
	cluster, hasCeiling bool

	// What the template says (bindAll; template also, when it exists, for
	// the other actions).
	template *oriav1alpha1.ScopeTemplate
	// roles to bind: referenced roles and inline roles that are in place.
	roles []string
	// pending inline roles not created yet: their existing bindings stay,
	// no new ones are made.
	pending []string
	// conflicted inline roles whose name a foreign ClusterRole holds.
	conflicted []string
	// ahead are inline roles in place whose rules are not (yet) the
	// template's: no new binding of them is made (deferAhead), existing
	// ones stay; deferred counts the bindings not made yet.
	ahead    []string
	deferred int
	targets  binding.Targets

	// want are the bindings to write (bindAll), existing the instance's
	// cached bindings, revoke those to delete: stale (bindAll), every one
	// (revokeAll), those no longer allowed (revokeOnly).
	want, existing, revoke binding.Set
	// ceiling is set for a bindAll instance with a ceiling
	// (spec.serviceAccount; see ceiling.go).
	ceiling *ceiling
	// refused are the Forbidden outcomes of the bindings the ceiling's
	// ServiceAccount may not grant (Gather asked it: askCeiling), left out
	// of want; drop are the existing bindings at their names, deleted
	// right after the writes.
	refused []engine.Outcome
	drop    binding.Set
	// unbound are the target namespaces where the binding of a pending
	// role or of a role ahead does not exist: not fully bound, whatever
	// the writes do (unboundNamespaces).
	unbound map[string]bool
	// gate is the instance's gate and what is done with it.
	gate gatePlan
}

// gatePlan is what a reconcile decided of the instance's gate.
type gatePlan struct {
	op gateOp
	// want is the gate as it must be (gateCreate, gateNarrow, gateFill),
	// or emptied (gateEnd: binding.EmptiedGate; nil when it is empty
	// already).
	want *rbacv1.ClusterRole
	// cur is oria's gate of this instance as the cache shows it; nil when
	// it has none.
	cur *rbacv1.ClusterRole
	// conflict names the role that holds the gate's name ("" when none).
	conflict string
	// missing are the roles the gate copies that do not exist (sorted): it
	// holds none of their rules, and the instance says ClusterRoleNotFound.
	missing []string
}

// wanted reports whether the instance binds its gate.
func (g gatePlan) wanted() bool {
	return g.op == gateCreate || g.op == gateNarrow || g.op == gateFill
}

// filled reports whether the gate as wanted grants something.
func (g gatePlan) filled() bool { return g.wanted() && ownership.GateGrants(g.want) }

// serviceAccountMissing reports whether the instance's ServiceAccount does
// not exist (a spec error looked at again within ServiceAccountRecheck).
func (p *plan) serviceAccountMissing() bool {
	return p.specErr != nil && p.specErr.Reason == oriav1alpha1.ReasonServiceAccountNotFound
}

// deferAhead drops from the wanted bindings those of roles ahead (an
// inline role whose rules are not yet its template's) that do not exist:
// a new binding is made only against the rules the guard checked for it,
// so those are deferred until the role holds them.
// Existing ones stay wanted (kept, and, for an instance with a ceiling,
// checked again by the ceiling for the new rules).
func (p *plan) deferAhead() {
	if len(p.ahead) == 0 {
		return
	}
	existing := p.existing.Keys()
	n := p.want.Len()
	p.want = p.want.Filter(func(b client.Object) bool {
		return existing[engine.Key(b)] || !slices.Contains(p.ahead, binding.RoleOf(b))
	})
	p.deferred = n - p.want.Len()
}

// unboundNamespaces returns the target namespaces where a binding of one
// of roles (pending, or ahead) does not exist (kept from before): such a
// namespace is not fully bound.
func unboundNamespaces(instance string, targets []string, roles []string, existing binding.Set) map[string]bool {
	if len(roles) == 0 {
		return nil
	}
	have := existing.Keys()
	out := map[string]bool{}
	for _, ns := range targets {
		for _, role := range roles {
			if !have[types.NamespacedName{Namespace: ns, Name: binding.BindingName(instance, role)}] {
				out[ns] = true
				break
			}
		}
	}
	return out
}
