package scopeinstance_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestCeilingServiceAccountMissing: an instance naming a ServiceAccount that
// does not exist writes nothing and says so; once it exists but may not
// write bindings, the refusal is reported as Forbidden, naming the
// ServiceAccount; nothing is bound beyond it.
func TestCeilingServiceAccountMissing(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns := namespace(t, "att", nil)
	saNS := namespace(t, "att-sa", nil)
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User("alice"))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{ns}, nil)
	si.Spec.ServiceAccount = &oriav1alpha1.ServiceAccountReference{Namespace: saNS, Name: "ceiling"}
	create(t, si)

	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonServiceAccountNotFound)
	_, cond := ready(t, si.Name)
	assert.Contains(t, cond.Message, `ServiceAccount "ceiling"`)
	assert.Empty(t, roleBindingNamespaces(t, si.Name, "view"))

	create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: saNS, Name: "ceiling"}})
	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonForbidden)
	_, cond = ready(t, si.Name)
	assert.Contains(t, cond.Message, "system:serviceaccount:"+saNS+":ceiling")
	assert.Empty(t, roleBindingNamespaces(t, si.Name, "view"), "nothing bound beyond the ServiceAccount")
	allowed, err := testutil.Allowed(ctx, k8sClient, testutil.Access{User: "alice", Verb: "list", Resource: "pods", Namespace: ns})
	require.NoError(t, err)
	assert.False(t, allowed)

	// The ServiceAccount may write RoleBindings there and bind view: the
	// binding appears without any other change.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ceiling"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: []string{"create", "update", "patch"}},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, ResourceNames: []string{"view"}, Verbs: []string{"bind"}},
	}}
	create(t, role)
	create(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ceiling"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "ceiling"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNS, Name: "ceiling"}}})
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	eventuallyBoundIn(t, si.Name, "view", ns)
}
