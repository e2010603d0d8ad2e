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
	"github.com/operator-framework/oria/internal/controller/scopeinstance"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestConflict: a same-name RoleBinding oria did not create is reported and
// left alone; the other namespaces are bound; removing it lets oria bind.
func TestConflict(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	good := namespace(t, "good", nil)
	taken := namespace(t, "taken", nil)
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User("alice"))
	create(t, tmpl)
	siName := testutil.UniqueName("si")
	foreign := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: binding.BindingName(siName, "view"), Namespace: taken, Labels: map[string]string{"mine": "yes"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{testutil.User("mallory")},
	}
	create(t, foreign)
	si := newInstance(siName, tmpl.Name, []string{good, taken}, nil)
	create(t, si)

	got := eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonConflict)
	_, cond := ready(t, si.Name)
	assert.Contains(t, cond.Message, foreign.Name)
	assert.Contains(t, cond.Message, taken)
	assert.Equal(t, []string{good}, got.Status.BoundNamespaces)
	eventuallyBoundIn(t, si.Name, "view", good)
	after := get(t, foreign.Name, taken, &rbacv1.RoleBinding{})
	assert.Equal(t, foreign.Labels, after.Labels, "the foreign binding is not modified")
	assert.Equal(t, "edit", after.RoleRef.Name)
	assert.Equal(t, []rbacv1.Subject{testutil.User("mallory")}, after.Subjects)
	testutil.EventuallyEvents(t, k8sClient, "ScopeInstance", si.Name, scopeinstance.EventConflict)

	require.NoError(t, k8sClient.Delete(ctx, foreign))
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	eventuallyBoundIn(t, si.Name, "view", good, taken)
}

// TestRoleRefChangeReplacesBinding: a binding of oria's whose roleRef
// differs (roleRef is immutable) is deleted and created again; one without
// the instance's ownerReference (say, left by a deleted instance of the same
// name) is adopted in place.
func TestRoleRefChangeReplacesBinding(t *testing.T) {
	testutil.NeedCluster(t)
	ns := namespace(t, "rr", nil)
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}, {Name: "edit"}}, testutil.User("alice"))
	create(t, tmpl)
	siName := testutil.UniqueName("si")

	// Bindings with the instance's labels, made before it exists: one with
	// another roleRef, one right but without owner.
	labels := map[string]string{
		oriav1alpha1.LabelManaged:       oriav1alpha1.ManagedValue,
		oriav1alpha1.LabelScopeInstance: siName,
		oriav1alpha1.LabelScopeTemplate: tmpl.Name,
	}
	wrongRef := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: binding.BindingName(siName, "view"), Namespace: ns, Labels: labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects:   []rbacv1.Subject{testutil.User("alice")},
	}
	orphan := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: binding.BindingName(siName, "edit"), Namespace: ns, Labels: labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{testutil.User("alice")},
	}
	create(t, wrongRef)
	create(t, orphan)

	si := newInstance(siName, tmpl.Name, []string{ns}, nil)
	create(t, si)
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	si = get(t, si.Name, "", &oriav1alpha1.ScopeInstance{})

	replaced := get(t, wrongRef.Name, ns, &rbacv1.RoleBinding{})
	assert.Equal(t, "view", replaced.RoleRef.Name)
	assert.NotEqual(t, wrongRef.UID, replaced.UID, "replaced, not updated")
	adopted := get(t, orphan.Name, ns, &rbacv1.RoleBinding{})
	assert.Equal(t, orphan.UID, adopted.UID, "adopted in place")
	for _, rb := range []*rbacv1.RoleBinding{replaced, adopted} {
		require.Len(t, rb.OwnerReferences, 1)
		assert.Equal(t, si.UID, rb.OwnerReferences[0].UID)
	}
	testutil.EventuallyEvents(t, k8sClient, "ScopeInstance", si.Name, scopeinstance.EventBindingsReplaced)
}

// TestInlineRoleConflict: when a foreign ClusterRole holds the name of a
// template's inline role, nothing is bound to it.
func TestInlineRoleConflict(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns := namespace(t, "irc", nil)
	roleName := testutil.UniqueName("taken-role")
	foreign := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: roleName},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}},
	}
	create(t, foreign)
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: roleName, Rules: podRules}, {Name: "view"}}, testutil.User("alice"))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{ns}, nil)
	create(t, si)

	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonConflict)
	_, cond := ready(t, si.Name)
	assert.Contains(t, cond.Message, roleName)
	eventuallyBoundIn(t, si.Name, "view", ns)
	assert.Empty(t, roleBindingNamespaces(t, si.Name, roleName), "nothing binds the foreign role")
	allowed, err := testutil.Allowed(ctx, k8sClient, testutil.Access{User: "alice", Verb: "delete", Resource: "secrets", Namespace: ns})
	require.NoError(t, err)
	assert.False(t, allowed)

	// Once the foreign role is gone, the template creates its own and the
	// instance binds it.
	require.NoError(t, k8sClient.Delete(ctx, foreign))
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	eventuallyBoundIn(t, si.Name, roleName, ns)
}
