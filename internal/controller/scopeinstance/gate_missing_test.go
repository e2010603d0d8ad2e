package scopeinstance_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestGatedGrantRoleDeleted (issue 40): a gated grant whose only role is
// deleted says so at once (Ready False, ClusterRoleNotFound, naming the
// role), not Bound in 0 namespaces "no namespace matches yet": its gate is
// empty, so it grants nothing, while every namespace matches. The role
// created again grants again, Bound in every namespace.
func TestGatedGrantRoleDeleted(t *testing.T) {
	testutil.NeedCluster(t)
	label := testutil.UniqueName("gone")
	var nss []string
	for range 3 {
		nss = append(nss, namespace(t, "gm", map[string]string{label: "yes"}))
	}
	role := podReader(t)
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: role}}, testutil.User("alice"))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, nil, matchLabels(label, "yes"))
	si.Spec.ExpiresAt = wholeSecondsFromNow(time.Hour)
	create(t, si)
	var checks []testutil.Access
	for _, ns := range nss {
		checks = append(checks, testutil.Access{User: "alice", Verb: "list", Resource: "pods", Namespace: ns})
	}
	grantsNow(t, true, checks...)
	si = eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	gateName := binding.GateName(si.Name, string(si.UID))

	deleted := time.Now()
	require.NoError(t, k8sClient.Delete(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}}))
	grantsNow(t, false, checks...)
	got := eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonClusterRoleNotFound)
	t.Logf("ClusterRoleNotFound %s after the role was deleted", time.Since(deleted).Round(time.Millisecond))
	assert.Less(t, time.Since(deleted), windowJitter, "the instance reads its gate's roles itself: no wait for the template's recheck")
	msg := meta.FindStatusCondition(got.Status.Conditions, oriav1alpha1.TypeReady).Message
	assert.Contains(t, msg, role)
	assert.Contains(t, msg, gateName)
	assert.NotContains(t, msg, "no namespace matches")
	assert.Zero(t, got.Status.BoundNamespaceCount, "an empty gate grants nothing anywhere")

	create(t, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: podRules})
	grantsNow(t, true, checks...)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		si, cond := ready(c, si.Name)
		if assert.NotNil(c, cond) {
			assert.Equal(c, oriav1alpha1.ReasonBound, cond.Reason)
		}
		assert.ElementsMatch(c, nss, si.Status.BoundNamespaces)
	}, testutil.Timeout, testutil.Interval)
}
