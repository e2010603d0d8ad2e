package scopeinstance_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestRevocationLandsThroughATemplateError (issue 29, case 1): an instance
// whose template became invalid (an inline role with no verbs, which the
// guard now refuses, but a template stored before may have) keeps at most
// what its last valid state granted and its current spec still allows: the
// admin's narrowing of spec.namespaces, a role or a subject removed from the
// template, each take effect while the template is still invalid.
func TestRevocationLandsThroughATemplateError(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	keep, victim := namespace(t, "nk", nil), namespace(t, "nv", nil)
	// (No controller-manager here aggregates view and edit: roles of
	// their own.)
	view := podReader(t)
	edit := testutil.UniqueName("pod-deleter")
	create(t, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: edit},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"delete"}}}})
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: view}, {Name: edit}},
		testutil.User("alice"), testutil.User("mallory"))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{keep, victim}, nil)
	create(t, si)
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	eventuallyBoundIn(t, si.Name, view, keep, victim)
	eventuallyBoundIn(t, si.Name, edit, keep, victim)

	update(t, tmpl, func() {
		tmpl.Spec.ClusterRoles = append(tmpl.Spec.ClusterRoles, oriav1alpha1.ClusterRoleTemplate{
			Name: testutil.UniqueName("broken"), Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{}}}})
	})
	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonTemplateInvalid)
	assert.ElementsMatch(t, []string{keep, victim}, roleBindingNamespaces(t, si.Name, view), "an error alone takes nothing away")

	allowed := func(c *assert.CollectT, who, verb, ns string) bool {
		ok, err := testutil.Allowed(ctx, k8sClient, testutil.Access{User: who, Verb: verb, Resource: "pods", Namespace: ns})
		assert.NoError(c, err)
		return ok
	}
	// The admin narrows the namespaces: victim goes.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.True(c, allowed(c, "alice", "list", victim))
	}, testutil.Timeout, testutil.Interval)
	start := time.Now()
	update(t, si, func() { si.Spec.Namespaces = []string{keep} })
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.False(c, allowed(c, "alice", "list", victim))
	}, testutil.Timeout, 20*time.Millisecond)
	t.Logf("namespace narrowed under a spec error in %s", time.Since(start))
	eventuallyBoundIn(t, si.Name, view, keep)
	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonTemplateInvalid)

	// The admin removes edit, and mallory, from the still invalid template.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.True(c, allowed(c, "mallory", "list", keep))
		assert.True(c, allowed(c, "alice", "delete", keep))
	}, testutil.Timeout, testutil.Interval)
	update(t, tmpl, func() {
		tmpl.Spec.ClusterRoles = append([]oriav1alpha1.ClusterRoleTemplate{{Name: view}}, tmpl.Spec.ClusterRoles[2:]...)
		tmpl.Spec.BindingTemplate.Subjects = []rbacv1.Subject{testutil.User("alice")}
	})
	eventuallyBoundIn(t, si.Name, edit)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.False(c, allowed(c, "mallory", "list", keep), "a subject the template no longer names loses access")
		assert.False(c, allowed(c, "alice", "delete", keep), "a role the template no longer names goes")
	}, testutil.Timeout, testutil.Interval)
	// Fixing the template binds what it names again.
	update(t, tmpl, func() { tmpl.Spec.ClusterRoles = tmpl.Spec.ClusterRoles[:1] })
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	eventuallyBoundIn(t, si.Name, view, keep)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.True(c, allowed(c, "alice", "list", keep))
	}, testutil.Timeout, testutil.Interval)
}
