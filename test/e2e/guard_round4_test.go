package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestGateCannotBeNamed (issue 38, case 1): an admin's gated grant is
// pending, so its gate is empty and "held" by anyone. D, who may write
// oria's kinds, computes the gate's name and names it in a template of
// their own: refused at admission for everyone (a spec error), whether the
// role is referenced or inline, so D's instances in the victim namespace
// and cluster-wide are never made.
func TestGateCannotBeNamed(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	user, as := delegate(t, "gate-namer")
	victim := createNamespace(t, "victim", map[string]string{"gate-victim": user})
	adminTmpl := testutil.ScopeTemplate(testutil.UniqueName("admin-grant"), []oriav1alpha1.ClusterRoleTemplate{{Name: "edit"}}, testutil.User("victim-user"))
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("gated")},
		Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: adminTmpl.Name,
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"gate-victim": user}},
			NotBefore:         &metav1.Time{Time: time.Now().Add(time.Hour).Truncate(time.Second)}}}
	require.NoError(t, k8sClient.Create(ctx, adminTmpl))
	require.NoError(t, k8sClient.Create(ctx, si))
	cleanup(t, adminTmpl, si)
	gate := binding.GateName(si.Name, string(si.UID))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NoError(c, k8sClient.Get(ctx, client.ObjectKey{Name: gate}, &rbacv1.ClusterRole{}))
	}, time.Minute, 100*time.Millisecond, "the pending grant's gate exists, empty")

	for _, roles := range [][]oriav1alpha1.ClusterRoleTemplate{
		{{Name: gate}},
		{{Name: gate, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}},
	} {
		tmpl := testutil.ScopeTemplate(testutil.UniqueName("squat"), roles, testutil.User(user))
		err := as.Create(ctx, tmpl)
		if err == nil {
			cleanup(t, tmpl)
		}
		refused(t, err, "is a gate's name", gate)
	}
	// Not even an admin may: a template naming a gate would bind whatever
	// oria later copies into it.
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("squat"), []oriav1alpha1.ClusterRoleTemplate{{Name: gate}}, testutil.User(user))
	err := k8sClient.Create(ctx, tmpl)
	if err == nil {
		cleanup(t, tmpl)
	}
	refused(t, err, "refused for every user, cluster admins included")
	assert.False(t, can(t, testutil.Access{User: user, Verb: "create", Resource: "deployments", Group: "apps", Namespace: victim}))
}

// TestStatusWriteRefused (issue 38, case 4): a user with update on oria's
// status subresources moves the pinned UID of a re-created namespace:
// refused by the guard's ValidatingAdmissionPolicy, whatever the value.
func TestStatusWriteRefused(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	user := testutil.UniqueName("status-writer")
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{oriav1alpha1.GroupVersion.Group}, Resources: []string{"scopeinstances/status", "rbacpolicies/status", "scopetemplates/status"}, Verbs: []string{"update", "patch"}},
		{APIGroups: []string{oriav1alpha1.GroupVersion.Group}, Resources: []string{"scopeinstances"}, Verbs: []string{"get"}},
	}}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{testutil.User(user)}}
	testutil.Create(t, k8sClient, role)
	testutil.Create(t, k8sClient, crb)
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("pinned"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User(user))
	ns := createNamespace(t, "pinned", nil)
	si := scopeInstance(tmpl.Name, tmpl.Name, ns)
	require.NoError(t, k8sClient.Create(ctx, tmpl))
	require.NoError(t, k8sClient.Create(ctx, si))
	cleanup(t, tmpl, si)
	instanceReady(t, si, oriav1alpha1.ReasonBound, time.Minute)

	as := impersonate(t, user)
	cur := &oriav1alpha1.ScopeInstance{}
	require.NoError(t, as.Get(ctx, client.ObjectKeyFromObject(si), cur))
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Status.NamespaceUIDs = map[string]string{ns: "forged"}
	err := as.Status().Patch(ctx, cur, patch)
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "%v", err)
	assert.Contains(t, err.Error(), "the status of a ScopeInstance is written by oria alone")
}

// TestInlineRoleOfAnotherTemplate (issue 38: a role whose rules oria
// changes on its own): an admin's template has an inline role, which oria
// rewrites whenever the admin edits that template. D, admin of their own
// namespace, holds every rule it has today; that is no proof for what it
// will grant tomorrow, so D may bind it only with "bind" on it. D's own
// inline copy of the same rules still goes through.
func TestInlineRoleOfAnotherTemplate(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	user, as := delegate(t, "inline-borrower")
	ns := createNamespace(t, "borrower", nil)
	testutil.Create(t, k8sClient, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "admin-" + user, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects: []rbacv1.Subject{testutil.User(user)}})
	rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}
	shared := testutil.UniqueName("admins-inline")
	adminTmpl := testutil.ScopeTemplate(testutil.UniqueName("admins"), []oriav1alpha1.ClusterRoleTemplate{{Name: shared, Rules: rules}}, testutil.User("someone"))
	adminSI := scopeInstance(adminTmpl.Name, adminTmpl.Name, createNamespace(t, "admins", nil))
	require.NoError(t, k8sClient.Create(ctx, adminTmpl))
	require.NoError(t, k8sClient.Create(ctx, adminSI))
	cleanup(t, adminTmpl, adminSI)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NoError(c, k8sClient.Get(ctx, client.ObjectKey{Name: shared}, &rbacv1.ClusterRole{}))
	}, time.Minute, 100*time.Millisecond, "oria writes the admin's inline role, in use")

	borrowed := testutil.ScopeTemplate(testutil.UniqueName("borrowed"), []oriav1alpha1.ClusterRoleTemplate{{Name: shared}}, testutil.User(user+"-friend"))
	require.NoError(t, as.Create(ctx, borrowed), "a template binds nothing until an instance places it")
	cleanup(t, borrowed)
	si := scopeInstance(testutil.UniqueName("borrowed"), borrowed.Name, ns)
	err := as.Create(ctx, si)
	if err == nil {
		cleanup(t, si)
	}
	refused(t, err, shared, "inline role", adminTmpl.Name, "only \"bind\"")

	// With "bind" on the role, D accepts whatever it comes to grant.
	testutil.Create(t, k8sClient, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "bind-" + user, Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, ResourceNames: []string{shared}, Verbs: []string{"bind"}}}})
	testutil.Create(t, k8sClient, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bind-" + user, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "bind-" + user},
		Subjects: []rbacv1.Subject{testutil.User(user)}})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := as.Create(ctx, si)
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
		assert.NoError(c, err)
	}, 30*time.Second, 200*time.Millisecond, "admitted with bind on the role")
	cleanup(t, si)
	instanceReady(t, si, oriav1alpha1.ReasonBound, time.Minute)
	assert.True(t, can(t, testutil.Access{User: user + "-friend", Verb: "get", Resource: "configmaps", Namespace: ns}))
}

// TestGateAnnotationGrantsNothing (issue 38, case 2): an admin's gated
// grant is pending; D, who may delete oria's kinds, deletes its template;
// C, who may patch ClusterRoles (no bind, no escalate), tries to set the
// gate's gate-roles annotation to admin and view: Kubernetes refuses it,
// because the gate's seal is a rule C does not hold; written by a cluster
// admin instead, it changes nothing. Measured across notBefore: the
// grant's subject never reads secrets, and the gate never gains a rule.
func TestGateAnnotationGrantsNothing(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	user, as := delegate(t, "template-deleter")
	grantCluster(t, user, rbacv1.PolicyRule{APIGroups: []string{oriav1alpha1.GroupVersion.Group}, Resources: []string{"scopetemplates"}, Verbs: []string{"delete"}})
	patcher := testutil.UniqueName("role-patcher")
	grantCluster(t, patcher, rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, Verbs: []string{"get", "patch"}})
	subject := testutil.UniqueName("gated-subject")
	victim := createNamespace(t, "victim", map[string]string{"case2": subject})
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("admin-pods"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User(subject))
	notBefore := time.Now().Add(8 * time.Second).Truncate(time.Second)
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("gated")},
		Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: tmpl.Name,
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"case2": subject}},
			NotBefore:         &metav1.Time{Time: notBefore}, ExpiresAt: &metav1.Time{Time: notBefore.Add(time.Hour)}}}
	require.NoError(t, k8sClient.Create(ctx, tmpl))
	require.NoError(t, k8sClient.Create(ctx, si))
	cleanup(t, tmpl, si)
	gate := binding.GateName(si.Name, string(si.UID))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NoError(c, k8sClient.Get(ctx, client.ObjectKey{Name: gate}, &rbacv1.ClusterRole{}))
	}, time.Minute, 100*time.Millisecond, "the pending grant's gate exists, empty")

	require.NoError(t, as.Delete(ctx, tmpl), "D may delete templates")
	cr := &rbacv1.ClusterRole{}
	pc := impersonate(t, patcher)
	require.NoError(t, pc.Get(ctx, client.ObjectKey{Name: gate}, cr))
	patch := client.MergeFrom(cr.DeepCopy())
	cr.Annotations[oriav1alpha1.AnnotationGateRoles] = "admin,view"
	err := pc.Patch(ctx, cr, patch)
	require.Error(t, err, "C may patch ClusterRoles, but not a gate: its seal is a rule C does not hold")
	assert.True(t, apierrors.IsForbidden(err), "%v", err)
	assert.Contains(t, err.Error(), "/oria.operatorframework.io/gates/"+gate)
	// Whoever may write it anyway (here a cluster admin) gains nothing
	// either: a gate's sources never come from its annotation.
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKey{Name: gate}, cr))
	patch = client.MergeFrom(cr.DeepCopy())
	cr.Annotations[oriav1alpha1.AnnotationGateRoles] = "admin,view"
	require.NoError(t, k8sClient.Patch(ctx, cr, patch))

	secrets := testutil.Access{User: subject, Verb: "get", Resource: "secrets", Namespace: victim}
	pods := testutil.Access{User: subject, Verb: "list", Resource: "pods", Namespace: victim}
	for deadline := notBefore.Add(4 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		require.False(t, can(t, secrets), "the subject reads secrets at %s", time.Now().Sub(notBefore))
		require.False(t, can(t, pods), "the subject lists pods at %s (its template is gone)", time.Now().Sub(notBefore))
	}
	if err := k8sClient.Get(ctx, client.ObjectKey{Name: gate}, cr); err == nil {
		assert.False(t, ownership.GateGrants(cr), "the gate gained rules: %v", cr.Rules)
	}
}
