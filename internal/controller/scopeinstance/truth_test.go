package scopeinstance_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestReferencedClusterRoleMissing: an instance of a template whose
// referenced ClusterRole does not exist is not Bound: it says that the
// binding grants nothing yet. The binding exists (as Kubernetes allows) and
// the instance is Bound once the role is created.
func TestReferencedClusterRoleMissing(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns := namespace(t, "missing", nil)
	missing := testutil.UniqueName("viewer")
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: missing}}, testutil.User("alice"))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{ns}, nil)
	create(t, si)

	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonClusterRoleNotFound)
	_, cond := ready(t, si.Name)
	assert.Contains(t, cond.Message, missing)
	assert.Contains(t, cond.Message, "grant nothing")
	eventuallyBoundIn(t, si.Name, missing, ns)

	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: missing},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}
	testutil.Create(t, k8sClient, role)
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	allowed, err := testutil.Allowed(ctx, k8sClient, testutil.Access{User: "alice", Verb: "get", Resource: "pods", Namespace: ns})
	require.NoError(t, err)
	assert.True(t, allowed)
}

// TestNonStringBareLabel: `namespaceSelector: {team: 5}` (the design
// document's bare-label form with a number) is InvalidSelector, as the API
// reference says, not a selector that silently matches nothing.
func TestNonStringBareLabel(t *testing.T) {
	testutil.NeedCluster(t)
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User("alice"))
	create(t, tmpl)
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(oriav1alpha1.GroupVersion.WithKind("ScopeInstance"))
	u.SetName(testutil.UniqueName("si"))
	require.NoError(t, unstructured.SetNestedField(u.Object, tmpl.Name, "spec", "scopeTemplateName"))
	require.NoError(t, unstructured.SetNestedField(u.Object, map[string]any{"team": int64(5)}, "spec", "namespaceSelector"))
	create(t, u)
	eventuallyReady(t, u.GetName(), metav1.ConditionFalse, oriav1alpha1.ReasonInvalidSelector)
	_, cond := ready(t, u.GetName())
	assert.Contains(t, cond.Message, "team")
	assert.Contains(t, cond.Message, "non-string value 5")
}
