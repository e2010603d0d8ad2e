package e2e

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestKubectlGetOria: `kubectl get oria` lists the four kinds (the oria
// category), and a ScopeInstance that binds nothing shows 0 in its
// NAMESPACES column, not a blank; the wide columns are there.
func TestKubectlGetOria(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	dc, err := discovery.NewDiscoveryClientForConfig(cluster.Config)
	require.NoError(t, err)
	list, err := dc.ServerResourcesForGroupVersion(oriav1alpha1.GroupVersion.String())
	require.NoError(t, err)
	var inCategory []string
	for _, r := range list.APIResources {
		if slices.Contains(r.Categories, "oria") {
			inCategory = append(inCategory, r.Name)
		}
	}
	slices.Sort(inCategory)
	assert.Equal(t, []string{"accessrequests", "rbacpolicies", "scopeinstances", "scopetemplates"}, inCategory)

	name := testutil.UniqueName("columns")
	tmpl := testutil.ScopeTemplate(name, []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User("nobody"))
	si := scopeInstance(name, name)
	si.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"matches": "nothing-" + name}}
	require.NoError(t, k8sClient.Create(ctx, tmpl))
	require.NoError(t, k8sClient.Create(ctx, si))
	cleanup(t, tmpl, si)
	waitScopeInstanceReady(t, si.Name)

	cs, err := kubernetes.NewForConfig(cluster.Config)
	require.NoError(t, err)
	table := &metav1.Table{}
	require.NoError(t, cs.RESTClient().Get().AbsPath("/apis", oriav1alpha1.GroupVersion.String(), "scopeinstances", si.Name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(ctx).Into(table))
	require.Len(t, table.Rows, 1)
	for i, c := range table.ColumnDefinitions {
		if c.Name == "Namespaces" {
			assert.EqualValues(t, 0, table.Rows[0].Cells[i], "NAMESPACES shows 0")
		}
	}
	table = &metav1.Table{}
	require.NoError(t, cs.RESTClient().Get().AbsPath("/apis", oriav1alpha1.GroupVersion.String(), "scopetemplates", tmpl.Name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(ctx).Into(table))
	var wide []string
	for _, c := range table.ColumnDefinitions {
		if c.Priority > 0 {
			wide = append(wide, c.Name)
		}
	}
	assert.Equal(t, []string{"Roles", "Subjects"}, wide)
}
