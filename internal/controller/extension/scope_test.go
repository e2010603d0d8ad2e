package extension_test

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller/extension"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestLegacyNamesClusterScopedAPIs: in Legacy mode the roles of a
// cluster-scoped API aggregate into view/edit/admin like any other, but a
// RoleBinding to those roles never reaches it; the condition says so.
func TestLegacyNamesClusterScopedAPIs(t *testing.T) {
	testutil.NeedCluster(t)
	startManager(t, extension.Options{DefaultMode: unmanaged})
	g := group()
	ce := installed(t, legacy, "foos."+g)
	crd := testutil.CRD(g, "clusterfoos", "ClusterFoo", ce.Name)
	crd.Spec.Scope = apiextensionsv1.ClusterScoped
	testutil.Create(t, k8sClient, crd)

	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy,
		"ClusterRoles for 2 API(s)", "Cluster-scoped: clusterfoos."+g, "only through ClusterRoleBindings")
}
