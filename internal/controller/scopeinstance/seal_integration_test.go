package scopeinstance_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller/scopeinstance"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/testutil"
)

// The standby's write (scopeinstance.SealGates), against the API server: a gate
// is emptied to its seal only as its writer last saw it, under oria's field
// manager; a gate changed meanwhile is left alone; a gate deleted meanwhile
// is never created again (a server-side apply would). The role is not tied
// to an instance, so the controller leaves it alone.
func TestSealGates(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	name := testutil.UniqueName("oria-window-seal")
	seal := []rbacv1.PolicyRule{ownership.GateSeal(name)}
	create(t, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: append(seal, podRules...),
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"x": "y"}}}}})
	w := &engine.Writer{Client: k8sClient, Revoker: k8sClient, Engine: engine.New(engine.Unobserved)}
	key := types.NamespacedName{Name: name}

	seen := get(t, name, "", &rbacv1.ClusterRole{})
	changed := seen.DeepCopy()
	changed.Labels = map[string]string{"changed": "meanwhile"}
	require.NoError(t, k8sClient.Update(ctx, changed))
	out := scopeinstance.SealGates(ctx, w, []*rbacv1.ClusterRole{seen})
	require.Len(t, out, 1)
	assert.Equal(t, engine.Failed, out[0].Action, "a gate changed since it was seen is left alone")
	assert.Len(t, get(t, name, "", &rbacv1.ClusterRole{}).Rules, 1+len(podRules), "its rules are as they were")

	seen = get(t, name, "", &rbacv1.ClusterRole{})
	out = scopeinstance.SealGates(ctx, w, []*rbacv1.ClusterRole{seen})
	require.Len(t, out, 1)
	assert.Equal(t, engine.Updated, out[0].Action, "%v", out[0].Err)
	live := get(t, name, "", &rbacv1.ClusterRole{})
	assert.Equal(t, seal, live.Rules, "only the seal is left")
	assert.Nil(t, live.AggregationRule, "no aggregation rule is left")
	assert.False(t, ownership.GateGrants(live))
	var managers []string
	for _, m := range live.ManagedFields {
		managers = append(managers, m.Manager)
	}
	assert.Contains(t, managers, oriav1alpha1.FieldOwner, "written under oria's field manager")
	assert.Empty(t, scopeinstance.SealGates(ctx, w, []*rbacv1.ClusterRole{live}), "an empty gate costs nothing")

	require.NoError(t, k8sClient.Delete(ctx, live))
	out = scopeinstance.SealGates(ctx, w, []*rbacv1.ClusterRole{seen})
	require.Len(t, out, 1)
	assert.Equal(t, engine.Unchanged, out[0].Action, "a gate gone is emptied: %v", out[0].Err)
	assert.True(t, apierrors.IsNotFound(k8sClient.Get(ctx, key, &rbacv1.ClusterRole{})), "and is not created again")
}
