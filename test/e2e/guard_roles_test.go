package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/genroles"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/testutil"
)

// These tests are issue 29's case 5: oria binds and aggregates only roles
// it made or validated. A role under a generated name that is neither oria's
// nor a validated bundle role is reported (Conflict, naming it) and never
// bound for a policy; the policy never says Ready/Bound while its subjects
// lack part of what it names.

// roleMaker is a user who may create ClusterRoles (with any rules:
// escalate) but not bind them.
func roleMaker(t *testing.T) client.Client {
	t.Helper()
	name := testutil.UniqueName("role-maker")
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"},
			Verbs: []string{"create", "escalate"}}},
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{testutil.User(name)},
	}
	for _, o := range []client.Object{role, crb} {
		testutil.Create(t, k8sClient, o)
	}
	cleanup(t, role, crb)
	return impersonate(t, name)
}

// waitPolicyNotBound waits for the policy's Ready condition to be False with
// reason and a message naming each part, then checks that it stays so for a
// moment (it never turns Bound).
func waitPolicyNotBound(t *testing.T, name, reason string, parts ...string) {
	t.Helper()
	_, cond := testutil.EventuallyCondition(t, k8sClient, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}},
		testutil.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionFalse, Reason: reason, Message: parts})
	t.Logf("Ready=False %s: %s", cond.Reason, cond.Message)
	require.Never(t, func() bool {
		p := &oriav1alpha1.RBACPolicy{}
		if k8sClient.Get(context.Background(), client.ObjectKey{Name: name}, p) != nil {
			return false
		}
		c := meta.FindStatusCondition(p.Status.Conditions, oriav1alpha1.TypeReady)
		return c == nil || c.Status == metav1.ConditionTrue
	}, 3*time.Second, 100*time.Millisecond, "the policy says Ready")
}

// TestGuardRolesHandMadeRole: while the extension is Unmanaged, a user who
// may create ClusterRoles but not bind them makes <plural>.<group>-view with
// secrets read. The admin sets FineGrained and grants a ServiceAccount view
// through an RBACPolicy: the policy is Ready=False Conflict naming the role,
// and the ServiceAccount reads neither secrets nor the API through it; the
// rest of the policy (the role oria made) is bound.
func TestGuardRolesHandMadeRole(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	crd := extensionWithAPI(t, oriav1alpha1.RBACModeUnmanaged)
	ext := crd.Labels[oriav1alpha1.LabelOLMOwnerName]
	plural, group := crd.Spec.Names.Plural, crd.Spec.Group
	view := names.ExtensionRole(crd.Name, names.RoleView)

	secrets := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}}
	squatted := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: view},
		Rules:      append(genroles.Rules(crd.Name, names.RoleView), secrets),
	}
	require.NoError(t, roleMaker(t).Create(ctx, squatted), "creating ClusterRoles is all it takes")
	cleanup(t, squatted)

	testutil.SetRBACMode(t, k8sClient, ext, oriav1alpha1.RBACModeFineGrained)
	waitExtensionCondition(t, ext, metav1.ConditionFalse, oriav1alpha1.ReasonConflict)

	ns := createNamespace(t, "hand-made", nil)
	saNS := createNamespace(t, "robots", nil)
	policy := &oriav1alpha1.RBACPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("robot-view")},
		Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: ext, Access: oriav1alpha1.AccessView, Namespaces: []string{ns},
			Subjects: []rbacv1.Subject{testutil.ServiceAccount("robot", saNS)}},
	}
	require.NoError(t, k8sClient.Create(ctx, policy))
	cleanup(t, policy)
	robot := func(verb, group, resource string) testutil.Access {
		return testutil.Access{User: "system:serviceaccount:" + saNS + ":robot", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + saNS},
			Verb: verb, Group: group, Resource: resource, Namespace: ns}
	}

	waitPolicyNotBound(t, policy.Name, oriav1alpha1.ReasonConflict, `ClusterRole "`+view+`"`)
	testutil.EventuallyEvents(t, k8sClient, "RBACPolicy", policy.Name, oriav1alpha1.ReasonConflict)
	// The hand-made role is not bound: the ServiceAccount reads neither
	// secrets nor the API.
	eventuallyAccess(t, false, robot("get", "", "secrets"), robot("list", "", "secrets"), robot("list", group, plural), robot("get", group, plural))

	// The rest of the policy is in force: the -view-crdview role oria made
	// is bound in ns, the hand-made role nowhere. (Once the admin deletes
	// the hand-made role, oria generates its own at the extension's next
	// recheck, a minute by default, and the policy binds it:
	// TestForeignRoleIsNotBound in internal/controller/rbacpolicy.)
	crdview := names.ExtensionRole(crd.Name, names.RoleViewCRDView)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var rbs rbacv1.RoleBindingList
		require.NoError(c, k8sClient.List(ctx, &rbs, client.InNamespace(ns)))
		var refs []string
		for _, rb := range rbs.Items {
			refs = append(refs, rb.RoleRef.Name)
		}
		assert.Contains(c, refs, crdview)
		assert.NotContains(c, refs, view)
	}, testutil.Timeout, testutil.Interval)
	var crbs rbacv1.ClusterRoleBindingList
	require.NoError(t, k8sClient.List(ctx, &crbs))
	for _, crb := range crbs.Items {
		assert.NotEqual(t, view, crb.RoleRef.Name, "ClusterRoleBinding %s binds the hand-made role", crb.Name)
	}
}

// TestGuardRolesLeftoverRole: an admin's leftover role under the generated
// -view name, without watch, is not bound by a view policy, which says
// Conflict rather than Bound: its subjects would lack part of view.
func TestGuardRolesLeftoverRole(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	crd := extensionWithAPI(t, oriav1alpha1.RBACModeUnmanaged)
	ext := crd.Labels[oriav1alpha1.LabelOLMOwnerName]
	plural, group := crd.Spec.Names.Plural, crd.Spec.Group
	view := names.ExtensionRole(crd.Name, names.RoleView)
	leftover := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: view},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{group}, Resources: []string{plural}, Verbs: []string{"get", "list"}}},
	}
	testutil.Create(t, k8sClient, leftover)
	cleanup(t, leftover)

	testutil.SetRBACMode(t, k8sClient, ext, oriav1alpha1.RBACModeFineGrained)
	ns := createNamespace(t, "leftover", nil)
	user := testutil.UniqueName("viewer")
	policy := &oriav1alpha1.RBACPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("leftover-view")},
		Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: ext, Access: oriav1alpha1.AccessView, Namespaces: []string{ns},
			Subjects: []rbacv1.Subject{testutil.User(user)}},
	}
	require.NoError(t, k8sClient.Create(ctx, policy))
	cleanup(t, policy)
	waitPolicyNotBound(t, policy.Name, oriav1alpha1.ReasonConflict, `ClusterRole "`+view+`"`)
	viewer := func(verb string) testutil.Access {
		return testutil.Access{User: user, Verb: verb, Group: group, Resource: plural, Namespace: ns}
	}
	eventuallyAccess(t, false, viewer("get"), viewer("list"), viewer("watch"))
}
