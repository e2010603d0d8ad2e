package e2e

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// Issue 29: a revocation always lands, and authority is tied to what the
// guard checked, not to a name. Each test is a sequence by a delegated user
// D (create/update/patch on oria's kinds, admin of a namespace of their
// own) and an admin.

// grantCluster gives user rules cluster-wide (a ClusterRole and its
// binding, removed when the test ends).
func grantCluster(t *testing.T, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("grant-" + user)}, Rules: rules}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{testutil.User(user)}}
	for _, o := range []client.Object{role, crb} {
		testutil.Create(t, k8sClient, o)
	}
	cleanup(t, role, crb)
}

// revokedWithin waits until every check is denied and returns how long
// that took from start.
func revokedWithin(t *testing.T, start time.Time, checks ...testutil.Access) time.Duration {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, a := range checks {
			assert.False(c, can(c, a), "%s", a)
		}
	}, 30*time.Second, 20*time.Millisecond)
	return time.Since(start)
}

// TestRevocationLandsWhenTheTemplateIsGone (case 1): D deletes the
// template of an admin's instance that binds D in [victim, own]; the
// instance reports TemplateNotFound, and nothing it granted stays: a grant
// whose template is gone binds nothing (fail closed), within seconds.
// Re-created, the template binds again.
func TestRevocationLandsWhenTheTemplateIsGone(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	user, own, as := sequenceUser(t, "deleter")
	grantCluster(t, user, rbacv1.PolicyRule{APIGroups: []string{oriav1alpha1.GroupVersion.Group}, Resources: []string{"scopetemplates"}, Verbs: []string{"delete"}})
	victim := createNamespace(t, "victim", nil)
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("admin-view"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User(user))
	require.NoError(t, k8sClient.Create(ctx, tmpl))
	si := scopeInstance(testutil.UniqueName("admin-view"), tmpl.Name, victim, own)
	require.NoError(t, k8sClient.Create(ctx, si))
	cleanup(t, tmpl, si)
	inVictim := testutil.Access{User: user, Verb: "list", Resource: "pods", Namespace: victim}
	eventuallyAccess(t, true, inVictim)

	start := time.Now()
	require.NoError(t, as.Delete(ctx, tmpl), "D may delete templates")
	took := revokedWithin(t, start, inVictim)
	t.Logf("revocation with the template gone: %s", took)
	assert.Less(t, took, 5*time.Second)
	instanceReady(t, si, oriav1alpha1.ReasonTemplateNotFound, time.Minute)
	assert.False(t, can(t, inVictim), "and it stays revoked")

	again := testutil.ScopeTemplate(tmpl.Name, tmpl.Spec.ClusterRoles, testutil.User(user))
	require.NoError(t, k8sClient.Create(ctx, again))
	eventuallyAccess(t, true, inVictim)
}

// TestHeldRulesAreNeverBoundAnew (case 2): an admin's template binds D a
// role with secrets read. D binds it under D's own ServiceAccount as a ceiling,
// in D's namespace, and puts a finalizer on that binding. D then narrows
// the role's rules to configmaps (which D holds) and, at once, binds the
// template in victim. The ClusterRole keeps its secrets rules while the
// ServiceAccount is asked about the new ones; no binding is made against
// them: D never reads secrets in victim (polled every 10 ms), the finalizer
// does not keep the refused binding, and victim is bound once the role holds
// the new rules.
func TestHeldRulesAreNeverBoundAnew(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	user, own, as := sequenceUser(t, "holder")
	victim := createNamespace(t, "victim", nil)
	secrets := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}
	configmaps := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}
	grantCluster(t, user, configmaps)
	// D's ServiceAccount may grant secrets in D's namespace, not configmaps.
	ceiling(t, own, "sa-d", []rbacv1.PolicyRule{secrets}, own)

	role := testutil.UniqueName("held")
	tmpl := &oriav1alpha1.ScopeTemplate{ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("held")},
		Spec: oriav1alpha1.ScopeTemplateSpec{
			ClusterRoles:    []oriav1alpha1.ClusterRoleTemplate{{Name: role, Rules: []rbacv1.PolicyRule{secrets}}},
			BindingTemplate: oriav1alpha1.BindingTemplate{Subjects: []rbacv1.Subject{testutil.User(user)}},
		}}
	require.NoError(t, k8sClient.Create(ctx, tmpl))
	cleanup(t, tmpl)
	capped := scopeInstance(testutil.UniqueName("held-own"), tmpl.Name, own)
	capped.Spec.ServiceAccount = &oriav1alpha1.ServiceAccountReference{Namespace: own, Name: "sa-d"}
	require.NoError(t, as.Create(ctx, capped), "D may impersonate their own ServiceAccount")
	cleanup(t, capped)
	instanceReady(t, capped, oriav1alpha1.ReasonBound, time.Minute)
	var rbs rbacv1.RoleBindingList
	require.NoError(t, k8sClient.List(ctx, &rbs, client.InNamespace(own), client.MatchingLabels{oriav1alpha1.LabelScopeInstance: capped.Name}))
	require.Len(t, rbs.Items, 1)
	held := &rbs.Items[0]
	require.NoError(t, impersonate(t, user).Patch(ctx, held, client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":["example.com/keep-me"]}}`))), "D is admin of their namespace")

	secretsInVictim := testutil.Access{User: user, Verb: "get", Resource: "secrets", Namespace: victim}
	var leaked atomic.Bool
	pollCtx, stop := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for pollCtx.Err() == nil {
			if ok, err := testutil.Allowed(pollCtx, k8sClient, secretsInVictim); err == nil && ok {
				leaked.Store(true)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	defer stop()

	require.NoError(t, userUpdate(t, as, tmpl, func() { tmpl.Spec.ClusterRoles[0].Rules = []rbacv1.PolicyRule{configmaps} }),
		"D holds the new rules")
	inVictim := scopeInstance(testutil.UniqueName("held-victim"), tmpl.Name, victim)
	require.NoError(t, as.Create(ctx, inVictim), "D may grant configmaps read in victim")
	cleanup(t, inVictim)
	start := time.Now()

	// The refused binding goes, finalizer or not.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := k8sClient.Get(ctx, client.ObjectKeyFromObject(held), &rbacv1.RoleBinding{})
		assert.True(c, apierrors.IsNotFound(err), "the binding the ServiceAccount no longer allows is gone: %v", err)
	}, 30*time.Second, 20*time.Millisecond)
	t.Logf("refused binding with a finalizer removed after %s", time.Since(start))
	// The role gets its new rules, and only then is victim bound.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cr := &rbacv1.ClusterRole{}
		require.NoError(c, k8sClient.Get(ctx, client.ObjectKey{Name: role}, cr))
		assert.Equal(c, []rbacv1.PolicyRule{configmaps}, cr.Rules)
	}, time.Minute, 20*time.Millisecond)
	t.Logf("the role holds the new rules after %s", time.Since(start))
	instanceReady(t, inVictim, oriav1alpha1.ReasonBound, time.Minute)
	instanceReady(t, capped, oriav1alpha1.ReasonForbidden, time.Minute)
	time.Sleep(time.Second)
	stop()
	<-polled
	require.False(t, leaked.Load(), "D read secrets in %s through rules the guard never checked for D", victim)
}

// TestRecreatedNamespaceIsNotRebound (case 6): D, admin of phoenix, binds
// admin to themselves there (admitted). The admin deletes phoenix, which
// ends D's rights there, and creates a new phoenix: oria does not bind D in
// it (NamespaceRecreated), until the spec is written again by someone the
// guard admits for the new namespace; D's write of the window alone, which
// the guard admits unchecked, moves no pin (issue 38, case 3).
func TestRecreatedNamespaceIsNotRebound(t *testing.T) {
	runsBeside(t)
	ctx := context.Background()
	user, as := delegate(t, "phoenix")
	phoenix := createNamespace(t, "phoenix", nil)
	adminThere := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user + "-admin", Namespace: phoenix},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects: []rbacv1.Subject{testutil.User(user)}}
	require.NoError(t, k8sClient.Create(ctx, adminThere))
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("phoenix"), []oriav1alpha1.ClusterRoleTemplate{{Name: "admin"}}, testutil.User(user))
	si := scopeInstance(tmpl.Name, tmpl.Name, phoenix)
	require.NoError(t, as.Create(ctx, tmpl))
	require.NoError(t, as.Create(ctx, si), "D is admin of phoenix")
	cleanup(t, tmpl, si)
	instanceReady(t, si, oriav1alpha1.ReasonBound, time.Minute)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: phoenix}}
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKeyFromObject(ns), ns))
	oldUID := ns.UID
	require.NoError(t, k8sClient.Delete(ctx, ns))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := k8sClient.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{})
		assert.True(c, apierrors.IsNotFound(err), "namespace %s still there: %v", phoenix, err)
	}, 2*time.Minute, 200*time.Millisecond)
	reborn := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: phoenix}}
	require.NoError(t, k8sClient.Create(ctx, reborn))
	require.NotEqual(t, oldUID, reborn.UID)

	cond := instanceReady(t, si, oriav1alpha1.ReasonNamespaceRecreated, time.Minute)
	t.Log(cond.Message)
	assert.Contains(t, cond.Message, phoenix)
	adminInPhoenix := testutil.Access{User: user, Verb: "delete", Resource: "secrets", Namespace: phoenix}
	time.Sleep(2 * time.Second)
	assert.False(t, can(t, adminInPhoenix), "D's grant in the old phoenix must not follow the name")
	var rbs rbacv1.RoleBindingList
	require.NoError(t, k8sClient.List(ctx, &rbs, client.InNamespace(phoenix), client.MatchingLabels{oriav1alpha1.LabelScopeInstance: si.Name}))
	assert.Empty(t, rbs.Items)

	// D cannot re-affirm it: the guard checks the new phoenix.
	refused(t, userUpdate(t, as, si, func() { si.Spec.Namespaces = []string{phoenix, phoenix + "-x"} }), phoenix)
	// Nor by a write of the window alone (issue 38, case 3): an end added is
	// a narrowing, admitted without a check, so it moves no pin.
	require.NoError(t, userUpdate(t, as, si, func() {
		si.Spec.ExpiresAt = &metav1.Time{Time: time.Now().Add(365 * 24 * time.Hour).Truncate(time.Second)}
	}), "an earlier end is admitted for everyone")
	time.Sleep(3 * time.Second)
	instanceReady(t, si, oriav1alpha1.ReasonNamespaceRecreated, time.Minute)
	assert.False(t, can(t, adminInPhoenix), "a window-only write re-pinned the re-created namespace")
	// The admin can: writing the spec again binds the new namespace.
	update(t, si, func() {
		si.Spec.Namespaces = nil
		si.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": phoenix}}
	})
	instanceReady(t, si, oriav1alpha1.ReasonBound, time.Minute)
	eventuallyAccess(t, true, adminInPhoenix)
	cleanup(t, reborn)
}
