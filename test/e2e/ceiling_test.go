package e2e

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestCeilingHoldsForTheLifeOfABinding (issue 21, case 6): an operator's
// template asks for pods; the admin binds it in a namespace under a ceiling
// ServiceAccount that holds pods there. An upgrade of the operator widens
// the template's role to secrets. The ceiling is asked again before the
// new rules take effect: it refuses, so the operator's binding is removed
// (it never reads secrets, not for a moment), the instance says Forbidden
// and why, and the role does get its new rules for everyone else. Once the
// admin grants the ceiling secrets there, the binding comes back, within
// oria's recheck, with no other change.
func TestCeilingHoldsForTheLifeOfABinding(t *testing.T) {
	runsBeside(t)
	ctx := context.Background()
	saNS, ns := createNamespace(t, "ceiling-sa", nil), createNamespace(t, "ceiling", nil)
	pods := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}
	secrets := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}}
	ceiling(t, saNS, "sa-x", []rbacv1.PolicyRule{pods}, ns)

	operator, role := testutil.UniqueName("operator"), testutil.UniqueName("operator-role")
	tmpl := &oriav1alpha1.ScopeTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("operator")},
		Spec: oriav1alpha1.ScopeTemplateSpec{
			ClusterRoles:    []oriav1alpha1.ClusterRoleTemplate{{Name: role, Rules: []rbacv1.PolicyRule{pods}}},
			BindingTemplate: oriav1alpha1.BindingTemplate{Subjects: []rbacv1.Subject{testutil.User(operator)}},
		},
	}
	require.NoError(t, k8sClient.Create(ctx, tmpl))
	cleanup(t, tmpl)
	si := scopeInstance(testutil.UniqueName("operator"), tmpl.Name, ns)
	si.Spec.ServiceAccount = &oriav1alpha1.ServiceAccountReference{Namespace: saNS, Name: "sa-x"}
	require.NoError(t, k8sClient.Create(ctx, si))
	cleanup(t, si)
	as := func(verb, resource string) testutil.Access {
		return testutil.Access{User: operator, Verb: verb, Resource: resource, Namespace: ns}
	}
	eventuallyAccess(t, true, as("list", "pods"))
	instanceReady(t, si, oriav1alpha1.ReasonBound, time.Minute)

	// From here on, the operator must never read secrets until the ceiling
	// holds them.
	pollCtx, stopPolling := context.WithCancel(ctx)
	var leaked atomic.Bool
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for pollCtx.Err() == nil {
			if ok, err := testutil.Allowed(pollCtx, k8sClient, as("get", "secrets")); err == nil && ok {
				leaked.Store(true)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	defer stopPolling()

	widened := []rbacv1.PolicyRule{pods, secrets}
	update(t, tmpl, func() { tmpl.Spec.ClusterRoles[0].Rules = widened })
	cond := instanceReady(t, si, oriav1alpha1.ReasonForbidden, time.Minute)
	t.Log(cond.Message)
	for _, part := range []string{"system:serviceaccount:" + saNS + ":sa-x", role, "secrets"} {
		assert.Contains(t, cond.Message, part)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cr := &rbacv1.ClusterRole{}
		require.NoError(c, k8sClient.Get(ctx, client.ObjectKey{Name: role}, cr))
		assert.Equal(c, widened, cr.Rules, "the template's role gets its new rules once the refused binding is gone")
	}, time.Minute, 100*time.Millisecond)
	var rbs rbacv1.RoleBindingList
	require.NoError(t, k8sClient.List(ctx, &rbs, client.InNamespace(ns), client.MatchingLabels{oriav1alpha1.LabelScopeInstance: si.Name}))
	assert.Empty(t, rbs.Items, "the refused binding is removed")
	time.Sleep(time.Second)
	stopPolling()
	<-polled
	require.False(t, leaked.Load(), "the operator could read secrets in %s beyond its ceiling", ns)
	assert.False(t, can(t, as("list", "pods")), "the binding is gone, its pods too: the ceiling allows the role as a whole")

	// The admin lets the ceiling grant secrets there: the binding is back.
	grantCeiling(t, saNS, "sa-x", ns, []rbacv1.PolicyRule{secrets})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.True(c, can(c, as("get", "secrets")))
	}, recheck, time.Second)
	instanceReady(t, si, oriav1alpha1.ReasonBound, recheck)
}

// instanceReady waits for si's Ready condition to have reason (for the
// current generation) and returns it.
func instanceReady(t *testing.T, si *oriav1alpha1.ScopeInstance, reason string, within time.Duration) metav1.Condition {
	t.Helper()
	var cond metav1.Condition
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &oriav1alpha1.ScopeInstance{}
		require.NoError(c, k8sClient.Get(context.Background(), client.ObjectKeyFromObject(si), got))
		ready := meta.FindStatusCondition(got.Status.Conditions, oriav1alpha1.TypeReady)
		if assert.NotNil(c, ready) && assert.Equal(c, got.Generation, ready.ObservedGeneration) {
			assert.Equal(c, reason, ready.Reason, ready.Message)
			cond = *ready
		}
	}, within, 200*time.Millisecond)
	return cond
}
