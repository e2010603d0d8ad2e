package rbacpolicy_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestClusterScopedAPI: a namespaced policy over an extension whose only
// API is cluster-scoped (cert-manager's ClusterIssuer, say) grants nothing,
// and says so and how to grant it, instead of claiming Bound.
func TestClusterScopedAPI(t *testing.T) {
	testutil.NeedCluster(t, cluster)
	ctx := context.Background()
	ext, _ := installed(t, oriav1alpha1.RBACModeFineGrained, "cs")
	crd := testutil.CRD(testutil.UniqueName("cs")+".example.com", "clusterwidgets", "ClusterWidget", ext.Name)
	crd.Spec.Scope = apiextensionsv1.ClusterScoped
	require.NoError(t, k8sClient.Create(ctx, crd))
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, crd) })

	p := newPolicy(t, ext.Name, oriav1alpha1.AccessEdit)
	got := waitReady(t, p.Name, oriav1alpha1.ReasonClusterScopedAPI)
	assert.Contains(t, readyMessage(got), crd.Name)
	assert.Contains(t, readyMessage(got), "grants nothing")
	assert.Contains(t, readyMessage(got), "cluster-wide")

	// Granted cluster-wide, the API is reachable: no such complaint.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		p.Spec.Namespaces = nil
		return k8sClient.Update(ctx, p)
	}))
	waitReady(t, p.Name, oriav1alpha1.ReasonProgressing)
}
