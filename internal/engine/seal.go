package engine

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/ownership"
)

// SealGates empties gates as a replica that does not lead does (the
// ScopeInstance controller's standby, scopeinstance/standby.go): each gate,
// as the caller's cache shows it, loses every rule but its seal
// (ownership.GateSeal) and any aggregationRule, in one JSON patch whose
// first operation tests the resourceVersion the cache showed. Unlike
// EmptyGates (a server-side apply, an upsert), it never creates: a gate
// deleted meanwhile counts as emptied (Unchanged), and a gate changed
// meanwhile (by the leader) is left alone (Failed, the caller looks again
// at what its cache then shows). It writes under oria's field manager, as
// the leader does; the leader's later applies force their ownership, so
// nobody fights over the rules. A gate already empty costs nothing.
func SealGates(ctx context.Context, w *Writer, gates []*rbacv1.ClusterRole) []Outcome {
	var todo []*rbacv1.ClusterRole
	for _, g := range gates {
		if g != nil && (ownership.GateGrants(g) || g.AggregationRule != nil) {
			todo = append(todo, g)
		}
	}
	out := make([]Outcome, len(todo))
	w.Engine.Parallel(w.workers(), len(todo), func(i int) {
		g := todo[i].DeepCopy()
		out[i] = Outcome{Name: g.Name, Action: Updated}
		ops := []map[string]any{
			{"op": "add", "path": "/rules", "value": []rbacv1.PolicyRule{ownership.GateSeal(g.Name)}},
			{"op": "add", "path": "/aggregationRule", "value": nil},
		}
		err := jsonPatch(ctx, w.Client, g, "/metadata/resourceVersion", todo[i].GetResourceVersion(), ops, client.FieldOwner(oriav1alpha1.FieldOwner))
		switch {
		case apierrors.IsNotFound(err):
			out[i].Action = Unchanged
		case err != nil:
			out[i].Action, out[i].Err = Failed, fmt.Errorf("emptying %s %s: %w", GateRoleKind().Name, describe(g), err)
		}
	})
	return w.Engine.observe(GateRoleKind().Name, out)
}
