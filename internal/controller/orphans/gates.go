package orphans

import (
	"context"
	"errors"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/ownership"
)

// Orphaned gates. A gate (binding.GateRole) is the one ClusterRole a
// time-bound grant over many namespaces binds in each of them; when its
// ScopeInstance is gone, the gate and its RoleBindings are orphans
// together. The sweep judges each object on its own, in whatever order its
// events come, so it cannot delete the bindings first by ordering its
// queue. Deleting the gate first would leave RoleBindings, in every
// namespace of the grant, naming a ClusterRole that no longer exists:
// whoever creates a ClusterRole under that name (by hand, before the
// sweep reaches the last binding) would grant its rules to the bindings'
// subjects there. So an orphaned gate is
//
//   - emptied first (one Update through the engine, engine.Rewrite):
//     its bindings then grant nothing, in every namespace at once, however
//     long their own deletions take;
//   - deleted only once no binding oria made for its instance names it
//     (boundTo, on oria's cache, then on the API server). Each deletion of such a binding brings
//     the gate back to the sweep (gateOfBinding), so the last one deletes
//     it: no polling, and an unchanged world costs nothing.
//
// A binding that still names the gate and is not oria's (someone removed
// its labels) is not waited for: oria would never delete it. A binding of
// the instance that is not an orphan (labelled, without a controller
// reference, for an instance of the same name created since) keeps the
// gate, empty, until that instance's controller deletes it as stale.

// isGateClaim reports whether c is the claim of a gate: a ClusterRole whose
// owner is a ScopeInstance.
func isGateClaim(kind string, c Claim) bool {
	return kind == KindClusterRole && c.Kind == ownership.KindScopeInstance
}

// instanceLabel is the scope-instance label value of the instance c
// claims: its bindings carry it.
func (c Claim) instanceLabel() string {
	if c.Name != "" {
		return names.LabelValue(c.Name)
	}
	return c.Label
}

// boundTo returns the bindings among rbs and crbs whose roleRef is the
// ClusterRole role, as "namespace/name" (or "name").
func boundTo(role string, rbs []*rbacv1.RoleBinding, crbs []*rbacv1.ClusterRoleBinding) []string {
	var out []string
	for _, rb := range rbs {
		if rb.RoleRef.Kind == "ClusterRole" && rb.RoleRef.Name == role {
			out = append(out, rb.Namespace+"/"+rb.Name)
		}
	}
	for _, crb := range crbs {
		if crb.RoleRef.Kind == "ClusterRole" && crb.RoleRef.Name == role {
			out = append(out, crb.Name)
		}
	}
	return out
}

// gateBindings returns oria's cached bindings of the instance c claims that
// name the gate.
func (r *Reconciler) gateBindings(gate string, c Claim) ([]string, error) {
	set, err := r.Bindings.List(c.instanceLabel())
	if err != nil {
		return nil, err
	}
	return boundTo(gate, set.RoleBindings, set.ClusterRoleBindings), nil
}

// waitForBindings reports, on the cache alone, whether a suspect gate is
// already empty and still named by bindings: nothing is to be written
// until their deletions bring it back, and the API server is not asked.
func (r *Reconciler) waitForBindings(cached *rbacv1.ClusterRole) bool {
	c, ok := ClaimOf(KindClusterRole, cached)
	if !ok || !isGateClaim(KindClusterRole, c) || ownership.GateGrants(cached) || cached.AggregationRule != nil {
		return false
	}
	left, err := r.gateBindings(cached.Name, c)
	return err == nil && len(left) > 0
}

// emptyGate removes every rule of an orphaned gate (live, as just read from
// the API server); nothing when it has none.
func (r *Reconciler) emptyGate(ctx context.Context, live *rbacv1.ClusterRole) []engine.Outcome {
	cur, emptied := binding.EmptiedGates([]*rbacv1.ClusterRole{live})
	return engine.Rewrite(ctx, r.writer(), engine.WholeClusterRoleKind(), func(o client.Object) bool { return ownership.IsManaged(o) }, cur, emptied)
}

// liveGateBindings is gateBindings as the API server has them: the last
// look before the gate is deleted, as the sweep reads a suspect and its
// owner again before it deletes anything.
func (r *Reconciler) liveGateBindings(ctx context.Context, gate string, c Claim) ([]string, error) {
	sel := client.MatchingLabels{oriav1alpha1.LabelManaged: oriav1alpha1.ManagedValue, oriav1alpha1.LabelScopeInstance: c.instanceLabel()}
	var rbs rbacv1.RoleBindingList
	var crbs rbacv1.ClusterRoleBindingList
	if err := r.APIReader.List(ctx, &rbs, sel); err != nil {
		return nil, fmt.Errorf("listing the RoleBindings of the gate %q: %w", gate, err)
	}
	if err := r.APIReader.List(ctx, &crbs, sel); err != nil {
		return nil, fmt.Errorf("listing the ClusterRoleBindings of the gate %q: %w", gate, err)
	}
	return boundTo(gate, pointers(rbs.Items), pointers(crbs.Items)), nil
}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// settleGate runs before an orphaned gate is deleted: it empties the gate,
// and reports whether it may be deleted now (no binding of its instance
// names it any more, in the cache nor on the API server).
func (r *Reconciler) settleGate(ctx context.Context, live *rbacv1.ClusterRole, c Claim) (bool, error) {
	if errs := engine.Summarize(r.emptyGate(ctx, live)).Errors; len(errs) > 0 {
		return false, errors.Join(errs...)
	}
	left, err := r.gateBindings(live.Name, c)
	if err == nil && len(left) == 0 {
		left, err = r.liveGateBindings(ctx, live.Name, c)
	}
	if err != nil {
		return false, err
	}
	if len(left) > 0 {
		ctrl.LoggerFrom(ctx).V(1).Info("an orphaned gate is empty and waits for its bindings to be deleted",
			"clusterRole", live.Name, "bindings", len(left), "first", left[0])
		return false, nil
	}
	return true, nil
}

// gateOfBinding is the dependent of a deleted binding: the ClusterRole it
// named, when the cache shows it as a suspect gate (an orphaned gate waits
// for its bindings' deletions).
func (r *Reconciler) gateOfBinding(ctx context.Context, ref rbacv1.RoleRef) []Request {
	if ref.Kind != "ClusterRole" {
		return nil
	}
	role := &rbacv1.ClusterRole{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: ref.Name}, role); err != nil {
		return nil
	}
	if c, ok := ClaimOf(KindClusterRole, role); !ok || !isGateClaim(KindClusterRole, c) || !r.suspect(KindClusterRole, role) {
		return nil
	}
	return []Request{{Kind: KindClusterRole, NamespacedName: types.NamespacedName{Name: ref.Name}}}
}
