package scopeinstance_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestMissingTemplate: TemplateNotFound until the template is created; when
// it is deleted its bindings go (fail closed) and the instance says why;
// re-created, it binds again.
func TestMissingTemplate(t *testing.T) {
	testutil.NeedCluster(t)
	ns := namespace(t, "mt", nil)
	tmplName := testutil.UniqueName("tmpl")
	si := newInstance(testutil.UniqueName("si"), tmplName, []string{ns}, nil)
	create(t, si)

	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonTemplateNotFound)
	_, cond := ready(t, si.Name)
	assert.Contains(t, cond.Message, tmplName)

	tmpl := testutil.ScopeTemplate(tmplName, []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User("alice"))
	create(t, tmpl)
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	eventuallyBoundIn(t, si.Name, "view", ns)

	require.NoError(t, k8sClient.Delete(context.Background(), tmpl))
	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonTemplateNotFound)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Empty(c, roleBindingNamespaces(c, si.Name, "view"), "nothing is granted while the template is missing")
	}, testutil.Timeout, testutil.Interval)

	create(t, testutil.ScopeTemplate(tmplName, []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User("alice")))
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	eventuallyBoundIn(t, si.Name, "view", ns)
}

// TestInvalidTemplate: an invalid template is reported on the instance;
// fixing it binds.
func TestInvalidTemplate(t *testing.T) {
	testutil.NeedCluster(t)
	ns := namespace(t, "it", nil)
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}},
		rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "Not_A_Name"})
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{ns}, nil)
	create(t, si)

	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonTemplateInvalid)
	_, cond := ready(t, si.Name)
	assert.Contains(t, cond.Message, "Not_A_Name")
	assert.Empty(t, roleBindingNamespaces(t, si.Name, "view"))

	update(t, tmpl, func() {
		tmpl.Spec.BindingTemplate.Subjects[0].Name = "a-name"
	})
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	eventuallyBoundIn(t, si.Name, "view", ns)
}

// TestTemplateEditsReachInstances: subjects, rules and roles changed in the
// template reach the bindings of every instance using it.
func TestTemplateEditsReachInstances(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns1 := namespace(t, "te", nil)
	ns2 := namespace(t, "te", nil)
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{
		{Name: "view"},
		{GenerateName: "pods-", Rules: podRules},
	}, testutil.User("alice"))
	create(t, tmpl)
	si1 := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{ns1}, nil)
	si2 := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{ns2}, nil)
	create(t, si1)
	create(t, si2)
	inline := binding.RoleName(tmpl.Name, oriav1alpha1.ClusterRoleTemplate{GenerateName: "pods-", Rules: podRules})
	eventuallyReady(t, si1.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	eventuallyReady(t, si2.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	eventuallyBoundIn(t, si1.Name, inline, ns1)
	eventuallyBoundIn(t, si2.Name, inline, ns2)

	allowed := func(c *assert.CollectT, who, verb, ns string) bool {
		ok, err := testutil.Allowed(ctx, k8sClient, testutil.Access{User: who, Verb: verb, Resource: "pods", Namespace: ns})
		assert.NoError(c, err)
		return ok
	}

	// Subjects: bob replaces alice in both namespaces.
	update(t, tmpl, func() {
		tmpl.Spec.BindingTemplate.Subjects = []rbacv1.Subject{testutil.User("bob")}
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, ns := range []string{ns1, ns2} {
			assert.True(c, allowed(c, "bob", "list", ns), "bob in %s", ns)
			assert.False(c, allowed(c, "alice", "list", ns), "alice in %s", ns)
		}
	}, testutil.Timeout, testutil.Interval)

	// Rules: the inline role gains delete.
	update(t, tmpl, func() {
		tmpl.Spec.ClusterRoles[1].Rules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "delete"}}}
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.True(c, allowed(c, "bob", "delete", ns1))
		assert.True(c, allowed(c, "bob", "delete", ns2))
	}, testutil.Timeout, testutil.Interval)

	// Roles: view becomes edit, a different roleRef: the view bindings are
	// replaced by edit bindings.
	update(t, tmpl, func() {
		tmpl.Spec.ClusterRoles[0].Name = "edit"
	})
	eventuallyBoundIn(t, si1.Name, "edit", ns1)
	eventuallyBoundIn(t, si2.Name, "edit", ns2)
	eventuallyBoundIn(t, si1.Name, "view", []string{}...)
	eventuallyBoundIn(t, si2.Name, "view", []string{}...)
	eventuallyBoundIn(t, si1.Name, inline, ns1)

	// Removing a role removes exactly its bindings (and the inline role).
	update(t, tmpl, func() {
		tmpl.Spec.ClusterRoles = tmpl.Spec.ClusterRoles[:1]
	})
	eventuallyBoundIn(t, si1.Name, inline, []string{}...)
	eventuallyBoundIn(t, si1.Name, "edit", ns1)
	testutil.EventuallyGone(t, k8sClient, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: inline}})
}
