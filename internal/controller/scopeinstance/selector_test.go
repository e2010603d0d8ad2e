package scopeinstance_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestInvalidSelector is terminal and disturbs nothing: the bindings made
// with the previous, valid selector stay.
func TestInvalidSelector(t *testing.T) {
	testutil.NeedCluster(t)
	team := testutil.UniqueName("team")
	ns := namespace(t, "is", map[string]string{"team": team})
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User("alice"))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, nil, matchLabels("team", team))
	create(t, si)
	eventuallyBoundIn(t, si.Name, "view", ns)

	update(t, si, func() {
		si.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "team", Operator: "Near", Values: []string{team}},
		}}
	})
	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonInvalidSelector)
	_, cond := ready(t, si.Name)
	assert.Contains(t, cond.Message, `"Near" is not a valid label selector operator`)
	// An unparseable selector allows nothing that can be told: the bindings
	// go (issue 29: a spec error keeps only what the current spec still
	// allows). The guard refuses such a selector for everyone; this one was
	// stored without it.
	eventuallyBoundIn(t, si.Name, "view")

	// The same holds for a selector the design document's shorthand made
	// unparseable (a misspelt matchLabels).
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(oriav1alpha1.GroupVersion.WithKind("ScopeInstance"))
	u.SetName(testutil.UniqueName("si"))
	require.NoError(t, unstructured.SetNestedField(u.Object, tmpl.Name, "spec", "scopeTemplateName"))
	require.NoError(t, unstructured.SetNestedField(u.Object, map[string]any{"matchLabel": map[string]any{"team": team}}, "spec", "namespaceSelector"))
	create(t, u)
	eventuallyReady(t, u.GetName(), metav1.ConditionFalse, oriav1alpha1.ReasonInvalidSelector)
}

// TestDesignDocumentSelector: the design document's bare-label selector
// (`namespaceSelector: {fooKey: barValue}`) selects by that label.
func TestDesignDocumentSelector(t *testing.T) {
	testutil.NeedCluster(t)
	value := testutil.UniqueName("v")
	match := namespace(t, "dd", map[string]string{"fooKey": value})
	namespace(t, "dd", map[string]string{"fooKey": "other"})
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User("alice"))
	create(t, tmpl)

	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(oriav1alpha1.GroupVersion.WithKind("ScopeInstance"))
	u.SetName(testutil.UniqueName("si"))
	require.NoError(t, unstructured.SetNestedField(u.Object, tmpl.Name, "spec", "scopeTemplateName"))
	require.NoError(t, unstructured.SetNestedField(u.Object, map[string]any{"fooKey": value}, "spec", "namespaceSelector"))
	testutil.Create(t, k8sClient, u, client.FieldValidation("Strict"))

	got := eventuallyReady(t, u.GetName(), metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	assert.Equal(t, []string{match}, got.Status.BoundNamespaces)
	eventuallyBoundIn(t, u.GetName(), "view", match)
}
