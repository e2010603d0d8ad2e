package scopeinstance_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestDeletingRevokesAtOnce: an instance whose deletion a finalizer holds
// back (someone's tool, or a foreground deletion) loses its bindings as
// soon as its deletion starts, not when the finalizer goes.
func TestDeletingRevokesAtOnce(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns := namespace(t, "del", nil)
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User("alice"))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{ns}, nil)
	si.Finalizers = []string{"example.com/keep"}
	create(t, si)
	eventuallyBoundIn(t, si.Name, "view", ns)

	require.NoError(t, k8sClient.Delete(ctx, si))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Empty(c, roleBindingNamespaces(c, si.Name, "view"))
	}, testutil.Timeout, testutil.Interval)
	got := &oriav1alpha1.ScopeInstance{}
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKeyFromObject(si), got))
	assert.False(t, got.DeletionTimestamp.IsZero(), "the finalizer still holds the instance")
	update(t, got, func() { got.Finalizers = nil })
}
