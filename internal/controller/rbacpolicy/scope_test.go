package rbacpolicy_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestClusterScopedAPI: a namespaced policy over an extension whose only
// API is cluster-scoped (cert-manager's ClusterIssuer, say) grants nothing,
// and says so and how to grant it, instead of claiming Bound.
func TestClusterScopedAPI(t *testing.T) {
	testutil.NeedCluster(t)
	ext, _ := installed(t, oriav1alpha1.RBACModeFineGrained, "cs")
	crd := testutil.CRD(testutil.UniqueName("cs")+".example.com", "clusterwidgets", "ClusterWidget", ext.Name)
	crd.Spec.Scope = apiextensionsv1.ClusterScoped
	testutil.Create(t, k8sClient, crd)

	p := newPolicy(t, ext.Name, oriav1alpha1.AccessEdit)
	got := waitReady(t, p.Name, oriav1alpha1.ReasonClusterScopedAPI)
	assert.Contains(t, readyMessage(got), crd.Name)
	assert.Contains(t, readyMessage(got), "grants nothing")
	assert.Contains(t, readyMessage(got), "cluster-wide")

	// Granted cluster-wide, the API is reachable: no such complaint.
	testutil.Update(t, k8sClient, p, func() { p.Spec.Namespaces = nil })
	waitReady(t, p.Name, oriav1alpha1.ReasonProgressing)
}
