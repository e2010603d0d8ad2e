package scopeinstance_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/testutil"
)

var (
	podsGetList    = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}
	secretsGetList = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}}
)

// ceilingAccount creates the ServiceAccount saNS/name and, in ns, a Role
// granting it rules and what writing RoleBindings takes, bound to it.
func ceilingAccount(t *testing.T, saNS, name, ns string, rules ...rbacv1.PolicyRule) *oriav1alpha1.ServiceAccountReference {
	t.Helper()
	create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: saNS, Name: name}})
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: append([]rbacv1.PolicyRule{
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: []string{"get", "create", "update", "patch"}},
	}, rules...)}
	create(t, role)
	create(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNS, Name: name}}})
	return &oriav1alpha1.ServiceAccountReference{Namespace: saNS, Name: name}
}

// everAllowed asks the API server's authorizer about a, over and over,
// until the returned function is called; that function reports whether
// any answer was "allowed".
func everAllowed(t *testing.T, a testutil.Access) func() bool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var allowed atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if ok, err := testutil.Allowed(ctx, k8sClient, a); err == nil && ok {
				allowed.Store(true)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	stop := func() bool { cancel(); <-done; return allowed.Load() }
	t.Cleanup(func() { stop() })
	return stop
}

// instanceWithCeiling creates a template with one inline role (podsGetList)
// bound to a new user, and an instance binding it in ns with sa as its
// ceiling; it returns the template, the instance, the role and the user
// once the instance is Bound.
func instanceWithCeiling(t *testing.T, ns string, sa *oriav1alpha1.ServiceAccountReference) (*oriav1alpha1.ScopeTemplate, *oriav1alpha1.ScopeInstance, string, string) {
	t.Helper()
	user, role := testutil.UniqueName("alice"), testutil.UniqueName("inline")
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"),
		[]oriav1alpha1.ClusterRoleTemplate{{Name: role, Rules: []rbacv1.PolicyRule{podsGetList}}}, testutil.User(user))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{ns}, nil)
	si.Spec.ServiceAccount = sa
	create(t, si)
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	eventuallyBoundIn(t, si.Name, role, ns)
	rb := get(t, binding.BindingName(si.Name, role), ns, &rbacv1.RoleBinding{})
	assert.Equal(t, binding.CeilingHash([]rbacv1.PolicyRule{podsGetList}), binding.Ceiling(rb), "the binding records the rules its ceiling allowed")
	return tmpl, si, role, user
}

func access(user, verb, resource, ns string) testutil.Access {
	return testutil.Access{User: user, Verb: verb, Resource: resource, Namespace: ns}
}

// TestCeilingRefusesWidenedInlineRole (issue 21, case 6): an instance whose
// ceiling holds pods only binds an inline role reading pods; the role is
// then widened to secrets. The ServiceAccount is asked again before the
// new rules take effect: it refuses, the binding goes, the instance reports
// Forbidden, and the subject never reads secrets, not even for a moment.
// The template's other users get the new rules once the binding is gone.
func TestCeilingRefusesWidenedInlineRole(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns, saNS := namespace(t, "ceil", nil), namespace(t, "ceil-sa", nil)
	sa := ceilingAccount(t, saNS, "sa-x", ns, podsGetList)
	tmpl, si, role, user := instanceWithCeiling(t, ns, sa)
	allowed, err := testutil.Allowed(ctx, k8sClient, access(user, "list", "pods", ns))
	require.NoError(t, err)
	require.True(t, allowed)

	secrets := everAllowed(t, access(user, "get", "secrets", ns))
	widened := []rbacv1.PolicyRule{podsGetList, secretsGetList}
	update(t, tmpl, func() { tmpl.Spec.ClusterRoles[0].Rules = widened })

	// Between the revocation and the template's new rules the instance may
	// wait for them (WaitingForRules); it ends refused, saying by whom.
	_, cond := testutil.EventuallyCondition(t, k8sClient, &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: si.Name}},
		testutil.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionFalse, Reason: oriav1alpha1.ReasonForbidden,
			Message: []string{"system:serviceaccount:" + saNS + ":sa-x", role, "secrets"}})
	t.Log(cond.Message)
	eventuallyBoundIn(t, si.Name, role)
	// The refusal unblocked the template: its role now has the new rules.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, widened, get(c, role, "", &rbacv1.ClusterRole{}).Rules)
	}, testutil.Timeout, testutil.Interval)
	testutil.EventuallyCondition(t, k8sClient, &oriav1alpha1.ScopeTemplate{ObjectMeta: metav1.ObjectMeta{Name: tmpl.Name}},
		testutil.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionTrue, Reason: oriav1alpha1.ReasonValid})
	time.Sleep(2 * time.Second) // the instance looks again (a create as sa-x, refused)
	assert.False(t, secrets(), "the subject could read secrets through a binding its ceiling no longer allows")
	assert.Empty(t, roleBindingNamespaces(t, si.Name, role))
	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonForbidden)
}

// TestCeilingAllowsWidenedInlineRole: the same change when the ceiling holds
// the new rules: the binding is kept (not recreated), records the new rules,
// and the subject gets them; a plain instance of the same template is not
// touched by any of it. Once settled, a reconcile writes nothing.
func TestCeilingAllowsWidenedInlineRole(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns, plainNS, saNS := namespace(t, "ceil", nil), namespace(t, "plain", nil), namespace(t, "ceil-sa", nil)
	sa := ceilingAccount(t, saNS, "sa-y", ns, podsGetList, secretsGetList)
	tmpl, si, role, user := instanceWithCeiling(t, ns, sa)
	plain := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{plainNS}, nil)
	create(t, plain)
	eventuallyBoundIn(t, plain.Name, role, plainNS)
	before := get(t, binding.BindingName(si.Name, role), ns, &rbacv1.RoleBinding{})

	widened := []rbacv1.PolicyRule{podsGetList, secretsGetList}
	update(t, tmpl, func() { tmpl.Spec.ClusterRoles[0].Rules = widened })
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ok, err := testutil.Allowed(ctx, k8sClient, access(user, "get", "secrets", ns))
		require.NoError(c, err)
		assert.True(c, ok)
	}, testutil.Timeout, testutil.Interval)
	after := get(t, binding.BindingName(si.Name, role), ns, &rbacv1.RoleBinding{})
	assert.Equal(t, before.UID, after.UID, "the binding follows the role; it is not recreated")
	assert.Equal(t, binding.CeilingHash(widened), binding.Ceiling(after))
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	assert.Empty(t, get(t, binding.BindingName(plain.Name, role), plainNS, &rbacv1.RoleBinding{}).Annotations,
		"a binding without a ceiling records none")

	r, counter := countingReconciler(t)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: si.Name}}
	testutil.EventuallyQuiet(t, r, counter, req)
	settled := get(t, after.Name, ns, &rbacv1.RoleBinding{})
	testutil.Quiet(t, r, counter, req, 2)
	// The ServiceAccount's writes do not go through the counting client:
	// the binding's resourceVersion says whether it was written.
	assert.Equal(t, settled.ResourceVersion, get(t, after.Name, ns, &rbacv1.RoleBinding{}).ResourceVersion, "an unchanged world is not written")
}

// TestCeilingReferencedRole: a referenced ClusterRole oria cannot hold back
// is widened by an admin; the instance with a ceiling rereads it on its
// recheck, its ServiceAccount refuses the new rules, and the binding goes.
func TestCeilingReferencedRole(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns, saNS := namespace(t, "ceil", nil), namespace(t, "ceil-sa", nil)
	sa := ceilingAccount(t, saNS, "sa-z", ns, podsGetList)
	ref := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("ref")}, Rules: []rbacv1.PolicyRule{podsGetList}}
	create(t, ref)
	user := testutil.UniqueName("alice")
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: ref.Name}}, testutil.User(user))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{ns}, nil)
	si.Spec.ServiceAccount = sa
	create(t, si)
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	eventuallyBoundIn(t, si.Name, ref.Name, ns)
	assert.Equal(t, binding.CeilingHash(ref.Rules), binding.Ceiling(get(t, binding.BindingName(si.Name, ref.Name), ns, &rbacv1.RoleBinding{})))

	update(t, ref, func() { ref.Rules = []rbacv1.PolicyRule{podsGetList, secretsGetList} })
	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonForbidden)
	eventuallyBoundIn(t, si.Name, ref.Name)
	allowed, err := testutil.Allowed(ctx, k8sClient, access(user, "get", "secrets", ns))
	require.NoError(t, err)
	assert.False(t, allowed)
	_, cond := ready(t, si.Name)
	assert.Contains(t, cond.Message, "secrets")
}

// TestCeilingWithoutServiceAccount: an instance whose ServiceAccount is
// gone writes nothing (ServiceAccountNotFound), but it cannot hold the
// template's new rules back for ever: a binding no ceiling can allow any
// more is removed, the role gets its new rules, and the subject never
// reads secrets.
func TestCeilingWithoutServiceAccount(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns, saNS := namespace(t, "ceil", nil), namespace(t, "ceil-sa", nil)
	sa := ceilingAccount(t, saNS, "sa-w", ns, podsGetList, secretsGetList)
	tmpl, si, role, user := instanceWithCeiling(t, ns, sa)
	require.NoError(t, k8sClient.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: saNS, Name: "sa-w"}}))
	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonServiceAccountNotFound)
	assert.Equal(t, []string{ns}, roleBindingNamespaces(t, si.Name, role), "a spec error keeps the bindings as they are")

	secrets := everAllowed(t, access(user, "get", "secrets", ns))
	widened := []rbacv1.PolicyRule{podsGetList, secretsGetList}
	update(t, tmpl, func() { tmpl.Spec.ClusterRoles[0].Rules = widened })
	eventuallyBoundIn(t, si.Name, role)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, widened, get(c, role, "", &rbacv1.ClusterRole{}).Rules)
	}, testutil.Timeout, testutil.Interval)
	time.Sleep(time.Second)
	assert.False(t, secrets(), "the subject could read secrets through a binding no ceiling allowed")
	got, _ := ready(t, si.Name)
	assert.Empty(t, got.Status.BoundNamespaces, "the removed binding's namespace is no longer reported bound")
}
