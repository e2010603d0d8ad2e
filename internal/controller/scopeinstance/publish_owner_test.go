package scopeinstance_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/publish"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestPublicationOwnership: oria creates the ConfigMap of a publication
// with an ownerReference to the instance (its UID; not a controller
// reference). When the publication moves, oria deletes the ConfigMap it
// created. One in which someone else writes a key loses the ownerReference
// and outlives the instance with that key.
func TestPublicationOwnership(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	op := namespace(t, "op", nil)
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User("alice"))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{op}, nil)
	si.Spec.Publication = &oriav1alpha1.Publication{ConfigMap: oriav1alpha1.ConfigMapKeyReference{Namespace: op, Name: "first"}}
	create(t, si)
	owned := []metav1.OwnerReference{publish.OwnerReference(si)}
	// publishedIn waits until oria published into the ConfigMap it created.
	publishedIn := func(name string) {
		t.Helper()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			cm := &corev1.ConfigMap{}
			if !assert.NoError(c, k8sClient.Get(ctx, client.ObjectKey{Namespace: op, Name: name}, cm)) {
				return
			}
			assert.Equal(c, op, cm.Data[oriav1alpha1.DefaultPublicationKey])
			assert.Empty(c, cmp.Diff(owned, cm.OwnerReferences))
		}, testutil.Timeout, testutil.Interval)
	}
	publishedIn("first")

	// The publication moves: the ConfigMap oria created goes.
	got := get(t, si.Name, "", &oriav1alpha1.ScopeInstance{})
	update(t, got, func() { got.Spec.Publication.ConfigMap.Name = "second" })
	publishedIn("second")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.True(c, notFound("first", op, &corev1.ConfigMap{}))
	}, testutil.Timeout, testutil.Interval)

	// Someone writes a key of their own: the ConfigMap is no longer oria's
	// alone, and loses the ownerReference.
	cm := get(t, "second", op, &corev1.ConfigMap{})
	cm.Data["theirs"] = "x"
	require.NoError(t, k8sClient.Update(ctx, cm, client.FieldOwner("someone")))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Empty(c, get(c, "second", op, &corev1.ConfigMap{}).OwnerReferences)
	}, testutil.Timeout, testutil.Interval)

	// Deleting the instance withdraws oria's key; their key and the
	// ConfigMap stay, and no ownerReference has the garbage collector
	// delete it (this control plane runs none: test/e2e
	// TestPublicationForgedMetadata checks that it stays).
	require.NoError(t, k8sClient.Delete(ctx, got))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.True(c, notFound(si.Name, "", &oriav1alpha1.ScopeInstance{}))
		cm := &corev1.ConfigMap{}
		if !assert.NoError(c, k8sClient.Get(ctx, client.ObjectKey{Namespace: op, Name: "second"}, cm), "deleted") {
			return
		}
		assert.Equal(c, map[string]string{"theirs": "x"}, cm.Data)
	}, testutil.Timeout, testutil.Interval)
	time.Sleep(2 * time.Second)
	assert.Equal(t, map[string]string{"theirs": "x"}, get(t, "second", op, &corev1.ConfigMap{}).Data)
}
