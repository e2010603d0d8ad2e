package scopeinstance

import (
	"context"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/lookup"
	"github.com/operator-framework/oria/internal/ownership"
)

// Gates (binding.Gated): a time-bound fan-out binds its gate in each of its
// namespaces. The writes, in the order that never grants early and never
// leaves a gap:
//
//   - a gate that does not exist is created first, then bound: a binding
//     is never made to a name no role holds;
//   - emptied (before notBefore, at expiresAt) it is written first, then
//     the bindings follow;
//   - filled (at notBefore) it is written after its bindings are in place,
//     so that the grant starts in every namespace with one write;
//   - outside the window, and once the instance is no longer gated, the
//     gate is emptied first, its bindings are deleted, then the gate.
//
// A gate's name is held by a role that is not this instance's (created in
// the instance's name before oria could): nothing is bound to it, the
// bindings that were are deleted, and the instance reports Conflict.

// gatePlan is what a reconcile decided of the instance's gate.
type gatePlan struct {
	// want is the gate as it must be; nil when the instance has no gate
	// (any more): cur then goes, after the bindings.
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

// filled reports whether the desired gate grants something.
func (g *gatePlan) filled() bool { return g != nil && g.want != nil && ownership.GateGrants(g.want) }

// gateFirstNow reports whether the gate is written before the bindings: it
// does not exist yet, or it is to grant nothing. (A gate no longer wanted
// inside the window is not emptied: the bindings replacing its own are
// made first, then its own are deleted, then the gate.)
func (g *gatePlan) gateFirstNow() bool {
	return g != nil && g.want != nil && (g.cur == nil || !g.filled())
}

// currentGate returns the instance's gate as oria's cache shows it (nil
// when there is none), and, when squat is set, the description of a role
// that holds the gate's name without being this instance's: a role without
// oria's labels is not in the cache, so that takes a read of the API server
// while the gate does not exist (only a gated instance, about to create its
// gate, asks; any other reconcile looks for a gate left over in the cache
// alone).
func (r *Reconciler) currentGate(ctx context.Context, si *oriav1alpha1.ScopeInstance, squat bool) (*rbacv1.ClusterRole, string, error) {
	name := binding.GateName(si.Name, string(si.UID))
	role := &rbacv1.ClusterRole{}
	err := r.Client.Get(ctx, types.NamespacedName{Name: name}, role)
	if apierrors.IsNotFound(err) && !squat {
		return nil, "", nil
	}
	if apierrors.IsNotFound(err) {
		// Not in oria's cache: absent, without oria's labels, or just
		// created and not seen yet.
		if err = r.APIReader.Get(ctx, types.NamespacedName{Name: name}, role); apierrors.IsNotFound(err) {
			return nil, "", nil
		}
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading ClusterRole %q: %w", name, err)
	}
	if !ownership.ControlledByUID(role, si.UID) {
		return nil, fmt.Sprintf("ClusterRole %q, the gate of this time-bound grant, exists and was not created by oria for this instance", name), nil
	}
	return role, "", nil
}

// liveSource returns the named role with the rules the cluster's role has.
func (r *Reconciler) liveSource(ctx context.Context, name string) (binding.GateSource, error) {
	role, err := r.roles.Get(ctx, name)
	if err != nil || role == nil {
		return binding.GateSource{Name: name}, err
	}
	return binding.GateSource{Name: name, Rules: role.Rules}, nil
}

// gateBindPlan turns the bind plan of a gated instance into one that binds
// its gate: every role of the template is a source (an inline role the
// ScopeTemplate controller has not written yet, or not yet with the
// template's rules, included: the gate copies the template's rules), except
// those in conflict; the RoleBindings bind the gate, which holds the
// sources' rules when open. A gate name held by someone else binds nothing.
func (r *Reconciler) gateBindPlan(ctx context.Context, si *oriav1alpha1.ScopeInstance, b *bindPlan, open bool) error {
	cur, conflict, err := r.currentGate(ctx, si, true)
	if err != nil {
		return err
	}
	b.roles = append(b.roles, b.pending...)
	slices.Sort(b.roles)
	b.pending, b.ahead = nil, nil
	b.gate = &gatePlan{cur: cur, conflict: conflict}
	if conflict != "" {
		b.wantRBs = nil
		return nil
	}
	sources, err := binding.GateSources(b.template, b.roles, func(name string) ([]rbacv1.PolicyRule, error) {
		role, err := r.roles.Get(ctx, name)
		if err != nil || role == nil {
			if err == nil {
				b.gate.missing = append(b.gate.missing, name)
			}
			return nil, err
		}
		return role.Rules, nil
	})
	if err != nil {
		return err
	}
	b.gate.want = binding.GateRole(si, sources, open)
	b.wantRBs = binding.RoleBindings(si, b.template.Name, []string{b.gate.want.Name}, b.template.Spec.BindingTemplate.Subjects, b.targets.Namespaces)
	return nil
}

// frozenGate is the gate of a gated instance with a spec error: it is not
// created, but one that exists keeps standing only for the roles it stood
// for that the spec still allows (none when the template does not exist),
// with their rules now, and only while the window is open. It
// never gains a rule it does not hold (binding.NarrowGate): what it stands
// for is read from its annotation, which anyone who may patch ClusterRoles
// can write, and the guard checked no template for it; a gate that was
// empty (pending) stays empty at notBefore.
func (r *Reconciler) frozenGate(ctx context.Context, si *oriav1alpha1.ScopeInstance, a *binding.Allowance, open bool) (*gatePlan, error) {
	cur, _, err := r.currentGate(ctx, si, false)
	if err != nil || cur == nil {
		return nil, err
	}
	var sources []binding.GateSource
	for _, name := range binding.GateRoles(cur) {
		if a.KnownTemplate && !slices.Contains(a.Roles, name) {
			continue
		}
		s, err := r.liveSource(ctx, name)
		if err != nil {
			return nil, err
		}
		sources = append(sources, s)
	}
	if a.KnownTemplate {
		// The gate's bindings are allowed as far as the gate is narrowed.
		a.Roles = append(a.Roles, cur.Name)
	}
	return &gatePlan{cur: cur, want: binding.NarrowGate(binding.GateRole(si, sources, open), cur)}, nil
}

// closedGate is the gate of an instance outside its window (or no longer
// gated): emptied, then deleted after the bindings.
func (r *Reconciler) closedGate(ctx context.Context, si *oriav1alpha1.ScopeInstance) (*gatePlan, error) {
	cur, _, err := r.currentGate(ctx, si, false)
	if err != nil || cur == nil {
		return nil, err
	}
	return &gatePlan{cur: cur}, nil
}

// gateKind writes gates.
var gateKind = engine.GateRoleKind()

// writeGate writes g.want, and returns the outcome (none when there is no
// gate to write).
func (r *Reconciler) writeGate(ctx context.Context, si *oriav1alpha1.ScopeInstance, g *gatePlan) []engine.Outcome {
	if g == nil || g.conflict != "" || g.want == nil {
		return nil
	}
	cached := map[types.NamespacedName]*rbacv1.ClusterRole{}
	if g.cur != nil {
		cached[engine.Key(g.cur)] = g.cur
	}
	owns := func(o client.Object) bool { return ownership.ControlledByUID(o, si.UID) }
	return engine.Ensure(ctx, r.writer(), gateKind, owns, []*rbacv1.ClusterRole{g.want}, cached)
}

// holdGate makes each of rbs that names the instance's gate block the
// gate's deletion (binding.HoldGate), by its UID: the cached gate's, or,
// when it was created (or replaced) just now, the API server's.
func (r *Reconciler) holdGate(ctx context.Context, si *oriav1alpha1.ScopeInstance, g *gatePlan, rbs []*rbacv1.RoleBinding) error {
	if g == nil || g.want == nil || g.conflict != "" || len(rbs) == 0 {
		return nil
	}
	uid := types.UID("")
	if g.cur != nil && g.cur.DeletionTimestamp.IsZero() {
		uid = g.cur.UID
	} else {
		live := &rbacv1.ClusterRole{}
		err := r.APIReader.Get(ctx, types.NamespacedName{Name: g.want.Name}, live)
		switch {
		case apierrors.IsNotFound(err):
			// Not created (a conflict, reported), or gone again: the next
			// reconcile creates it, and then its bindings.
			return fmt.Errorf("the gate %q of this time-bound grant does not exist yet", g.want.Name)
		case err != nil:
			return fmt.Errorf("reading the gate %q: %w", g.want.Name, err)
		case !ownership.ControlledByUID(live, si.UID):
			return fmt.Errorf("ClusterRole %q, the gate of this time-bound grant, was not created by oria for this instance", g.want.Name)
		}
		uid = live.UID
	}
	binding.HoldGate(rbs, binding.GateHold(g.want.Name, uid))
	return nil
}

// emptyGates removes the rules of gates (oria's, as the cache shows them)
// that have any, so that their bindings grant nothing before they go.
func (r *Reconciler) emptyGates(ctx context.Context, gates []*rbacv1.ClusterRole) []engine.Outcome {
	return engine.EmptyGates(ctx, r.writer(), gates)
}

// gateMissing is the result of a reconcile whose gate could not be
// created (g: that write): nothing else is written; a conflict is
// reported as such, an error retried.
func (r *Reconciler) gateMissing(si *oriav1alpha1.ScopeInstance, g engine.Summary) result {
	res := result{summary: g, gateless: true}
	for _, c := range g.Conflicts {
		res.conflicts = append(res.conflicts, c.Error())
	}
	r.recordEvents(si, nil, nil, nil, nil, res.conflicts)
	return res
}

// deleteGate deletes a gate that is no longer wanted, once its bindings
// are deleted (deleted: those deletions): a binding is never left to a
// name no role holds.
func (r *Reconciler) deleteGate(ctx context.Context, g *gatePlan, deleted []engine.Outcome) []engine.Outcome {
	if g == nil || g.want != nil || g.cur == nil || len(engine.Summarize(deleted).Errors) > 0 {
		return nil
	}
	return engine.Delete(ctx, r.writer(), gateKind.Name, []*rbacv1.ClusterRole{g.cur})
}

// gatesOf returns the gates in oria's cache of the instance of this name,
// whatever its UID (Cleanup: the instance is gone).
func (r *Reconciler) gatesOf(ctx context.Context, instance string) ([]*rbacv1.ClusterRole, error) {
	var list rbacv1.ClusterRoleList
	if err := r.Client.List(ctx, &list, client.MatchingLabels(ownership.GateLabels(instance))); err != nil {
		return nil, fmt.Errorf("listing the gates of ScopeInstance %q: %w", instance, err)
	}
	var out []*rbacv1.ClusterRole
	for i := range list.Items {
		if ownership.ControllerName(list.Items[i].OwnerReferences, ownership.KindScopeInstance) == instance {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// gatedInstances returns the names of the gated instances of a template
// that names the ClusterRole role: its gate copies the role.
func (r *Reconciler) gatedInstances(ctx context.Context, role string) []string {
	var templates oriav1alpha1.ScopeTemplateList
	if err := r.Client.List(ctx, &templates, client.MatchingFields{lookup.IndexScopeTemplateRole: role}, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the ScopeTemplates that name a ClusterRole", "clusterRole", role)
		return nil
	}
	var out []string
	for _, t := range templates.Items {
		var instances oriav1alpha1.ScopeInstanceList
		if err := r.Client.List(ctx, &instances, client.MatchingFields{lookup.IndexScopeTemplateName: t.Name}, client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing the ScopeInstances of a ScopeTemplate", "scopeTemplate", t.Name)
			continue
		}
		for _, si := range instances.Items {
			if binding.Gated(si.Spec) {
				out = append(out, si.Name)
			}
		}
	}
	return out
}

// A gate holds copies of rules oria itself need not hold: writing it needs
// escalate (as writing a template's inline roles does).
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=get;list;watch;create;update;patch;delete;bind;escalate

// A gate's bindings block its deletion (binding.HoldGate): where the
// OwnerReferencesPermissionEnforcement admission plugin is on, setting
// blockOwnerDeletion on a reference to a ClusterRole needs update on its
// finalizers.
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles/finalizers,verbs=update
