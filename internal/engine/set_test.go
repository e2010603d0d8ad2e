package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/ownership"
)

// TestSetWriter: a binding.Set is ensured and deleted whole, every kind,
// and the outcomes come back keyed like the set: kind by kind, in its
// order, with each kind's name and whether it is namespaced.
func TestSetWriter(t *testing.T) {
	ctx := context.Background()
	inst := instance("inst")
	subj := []rbacv1.Subject{sa("bot", "ns")}
	want := binding.Set{
		RoleBindings:        binding.RoleBindings(inst, "tmpl", []string{"view"}, subj, []string{"a", "b"}),
		ClusterRoleBindings: binding.ClusterRoleBindings(inst, "tmpl", []string{"view"}, subj),
	}
	var c calls
	cl := fakeClient(t, &c)
	w := writer(t, cl, nil)
	instanceOwns := ownership.InstanceOwner(inst.Name)
	owns := func(o client.Object) bool { return instanceOwns(o) }

	ensured := engine.EnsureSet(ctx, w, owns, want, binding.Set{})
	require.Len(t, ensured, 2)
	assert.Equal(t, engine.KindOutcome{Kind: "RoleBinding", Namespaced: true, Outcomes: ensured[0].Outcomes}, ensured[0])
	assert.Equal(t, "ClusterRoleBinding", ensured[1].Kind)
	assert.False(t, ensured[1].Namespaced)
	all := ensured.All()
	require.Len(t, all, want.Len())
	for i, o := range want.Objects() {
		assert.Equal(t, o.GetName(), all[i].Name, "in the order of the set's Objects")
		assert.Equal(t, engine.Created, all[i].Action)
	}
	assert.Equal(t, int32(3), c.create.Load())

	var live rbacv1.RoleBindingList
	require.NoError(t, cl.List(ctx, &live))
	var liveCRBs rbacv1.ClusterRoleBindingList
	require.NoError(t, cl.List(ctx, &liveCRBs))
	existing := binding.Set{}
	for i := range live.Items {
		existing.RoleBindings = append(existing.RoleBindings, &live.Items[i])
	}
	for i := range liveCRBs.Items {
		existing.ClusterRoleBindings = append(existing.ClusterRoleBindings, &liveCRBs.Items[i])
	}
	again := engine.EnsureSet(ctx, w, owns, want, existing)
	assert.Equal(t, 3, engine.Summarize(again.All()).Count[engine.Unchanged], "an unchanged set costs nothing")

	deleted := engine.DeleteSet(ctx, w, existing)
	assert.Equal(t, 3, deleted.Len())
	assert.Equal(t, 3, engine.Summarize(deleted.All()).Count[engine.Deleted])
	require.NoError(t, cl.List(ctx, &live))
	require.NoError(t, cl.List(ctx, &liveCRBs))
	assert.Empty(t, live.Items)
	assert.Empty(t, liveCRBs.Items)

	both := ensured.Plus(deleted)
	assert.Len(t, both[0].Outcomes, 4, "kind by kind")
	assert.Len(t, both[1].Outcomes, 2)
	assert.Len(t, ensured[0].Outcomes, 2, "Plus leaves its operands alone")
	assert.Equal(t, deleted, engine.SetOutcome(nil).Plus(deleted))
}
