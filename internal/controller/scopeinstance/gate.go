package scopeinstance

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/lookup"
	"github.com/operator-framework/oria/internal/ownership"
)

// Gates (binding.Gated): a time-bound fan-out binds its gate in each of its
// namespaces. The writes, in the order that never grants early and never
// leaves a gap (gateOp, decided by decideGate; Write runs them, and its
// gate writes are in write.go, in that order):
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
