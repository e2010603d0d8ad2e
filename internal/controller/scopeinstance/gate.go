package scopeinstance

import (
	"context"
	"fmt"

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
// leaves a gap (gateOp, decided by decideGate; Write runs them):
//
//   - a gate that does not exist is created first, then bound: a binding
//     is never made to a name no role holds (gateCreate);
//   - emptied (before notBefore) or narrowed (a spec error) it is written
//     first, then the bindings follow (gateNarrow);
//   - filled (at notBefore) it is written after its bindings are in place,
//     so that the grant starts in every namespace with one write
//     (gateFill);
//   - outside the window the gate is emptied first, its bindings are
//     deleted, then the gate (gateEnd); once the instance is no longer
//     gated, its bindings are replaced, then the gate deleted (gateDelete).
//
// A gate's name is held by a role that is not this instance's (created in
// the instance's name before oria could): nothing is bound to it, the
// bindings that were are deleted, and the instance reports Conflict.

// gateKind writes gates.
var gateKind = engine.GateRoleKind()

// writeGateFirst writes the gate when it goes before the bindings
// (gateCreate, gateNarrow; gateEnd: emptied), and returns the outcome.
func (r *Reconciler) writeGateFirst(ctx context.Context, si *oriav1alpha1.ScopeInstance, p *plan) []engine.Outcome {
	switch p.gate.op {
	case gateCreate, gateNarrow:
		return r.writeGate(ctx, si, p.gate)
	case gateEnd:
		return r.emptyGates(ctx, []*rbacv1.ClusterRole{p.gate.cur})
	}
	return nil
}

// writeGate writes g.want, and returns the outcome.
func (r *Reconciler) writeGate(ctx context.Context, si *oriav1alpha1.ScopeInstance, g gatePlan) []engine.Outcome {
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
func (r *Reconciler) holdGate(ctx context.Context, si *oriav1alpha1.ScopeInstance, g gatePlan, rbs []*rbacv1.RoleBinding) error {
	if !g.wanted() || len(rbs) == 0 {
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
func (r *Reconciler) deleteGate(ctx context.Context, g gatePlan, deleted []engine.Outcome) []engine.Outcome {
	if (g.op != gateEnd && g.op != gateDelete) || len(engine.Summarize(deleted).Errors) > 0 {
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
