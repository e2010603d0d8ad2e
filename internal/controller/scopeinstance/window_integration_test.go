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
	"github.com/operator-framework/oria/internal/controller/scopeinstance"
	"github.com/operator-framework/oria/internal/testutil"
)

// The machine running the tests is slow and shared: "at the instant" means
// within this much of it.
const windowJitter = 3 * time.Second

// wholeSecondsFromNow is now plus d, in whole seconds (as the API stores a
// time).
func wholeSecondsFromNow(d time.Duration) *metav1.Time {
	return &metav1.Time{Time: time.Now().Add(d).Truncate(time.Second)}
}

// waitBindings waits until the RoleBindings of instance for role exist in
// exactly namespaces (none: gone), polling every 20 ms, and returns when
// that was first seen.
func waitBindings(t *testing.T, instance, role string, namespaces ...string) time.Time {
	t.Helper()
	var seen time.Time
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := roleBindingNamespaces(c, instance, role)
		if assert.ElementsMatch(c, namespaces, got) {
			seen = time.Now()
		}
	}, testutil.Timeout, 20*time.Millisecond)
	return seen
}

// TestTimeBoundInstance: an instance with a window of a few seconds is
// Pending without bindings, Bound inside the window (within a few seconds of
// notBefore, saying until when, an instant and never a duration that
// would go stale), then Expired with its bindings
// deleted (within a few seconds of expiresAt); Events mark the grant, the
// warning and the expiry. Moving expiresAt later grants again.
func TestTimeBoundInstance(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns := namespace(t, "tb", nil)
	role := podReader(t)
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: role}}, testutil.User("alice"))
	create(t, tmpl)
	notBefore := wholeSecondsFromNow(5 * time.Second)
	expiresAt := &metav1.Time{Time: notBefore.Add(6 * time.Second)}
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{ns}, nil)
	si.Spec.NotBefore, si.Spec.ExpiresAt = notBefore, expiresAt
	create(t, si)
	alice := testutil.Access{User: "alice", Verb: "list", Resource: "pods", Namespace: ns}

	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonPending)
	require.True(t, time.Now().Before(notBefore.Time), "the test was too slow to see the instance pending")
	assert.Empty(t, roleBindingNamespaces(t, si.Name, role), "nothing is bound before notBefore")
	ok, err := testutil.Allowed(ctx, k8sClient, alice)
	require.NoError(t, err)
	assert.False(t, ok)

	bound := waitBindings(t, si.Name, role, ns)
	t.Logf("bound %s after notBefore", bound.Sub(notBefore.Time).Round(time.Millisecond))
	assert.False(t, bound.Before(notBefore.Time), "bound before notBefore")
	assert.Less(t, bound.Sub(notBefore.Time), windowJitter, "bound too long after notBefore")
	got := eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	msg := meta.FindStatusCondition(got.Status.Conditions, oriav1alpha1.TypeReady).Message
	assert.Contains(t, msg, "until "+expiresAt.UTC().Format(time.RFC3339))
	assert.NotContains(t, msg, "left)", "a status message holds instants, never a duration")

	gone := waitBindings(t, si.Name, role)
	t.Logf("bindings deleted %s after expiresAt", gone.Sub(expiresAt.Time).Round(time.Millisecond))
	assert.False(t, gone.Before(expiresAt.Time), "deleted before expiresAt")
	assert.Less(t, gone.Sub(expiresAt.Time), windowJitter, "deleted too long after expiresAt")
	got = eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonExpired)
	assert.Zero(t, got.Status.BoundNamespaceCount)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ok, err := testutil.Allowed(ctx, k8sClient, alice)
		assert.NoError(c, err)
		assert.False(c, ok)
	}, testutil.Timeout, testutil.Interval)
	testutil.EventuallyEvents(t, k8sClient, "ScopeInstance", si.Name,
		scopeinstance.EventAccessGranted, scopeinstance.EventAccessExpiring, scopeinstance.EventAccessExpired)
	assert.Empty(t, warnings(t, si.Name), "Pending and Expired are not warned about")

	// An admin extends it: a new grant.
	update(t, si, func() { si.Spec.ExpiresAt = wholeSecondsFromNow(time.Hour) })
	waitBindings(t, si.Name, role, ns)
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
}

// TestExpiryLandsThroughASpecError: an instance whose template turned
// invalid keeps its bindings (a spec error never revokes by surprise), but its
// expiry lands all the same; so does a window moved into the future
// (notBefore later: nothing is granted before it).
func TestExpiryLandsThroughASpecError(t *testing.T) {
	testutil.NeedCluster(t)
	ns := namespace(t, "tbx", nil)
	role := podReader(t)
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: role}}, testutil.User("alice"))
	create(t, tmpl)
	expiring := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{ns}, nil)
	create(t, expiring)
	deferred := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{ns}, nil)
	create(t, deferred)
	waitBindings(t, expiring.Name, role, ns)
	waitBindings(t, deferred.Name, role, ns)

	update(t, tmpl, func() {
		tmpl.Spec.BindingTemplate.Subjects = append(tmpl.Spec.BindingTemplate.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "Not_A_Name", Namespace: "x"})
	})
	eventuallyReady(t, expiring.Name, metav1.ConditionFalse, oriav1alpha1.ReasonTemplateInvalid)
	eventuallyReady(t, deferred.Name, metav1.ConditionFalse, oriav1alpha1.ReasonTemplateInvalid)
	assert.ElementsMatch(t, []string{ns}, roleBindingNamespaces(t, expiring.Name, role), "an invalid template alone takes nothing away")

	expiresAt := wholeSecondsFromNow(3 * time.Second)
	update(t, expiring, func() { expiring.Spec.ExpiresAt = expiresAt })
	update(t, deferred, func() { deferred.Spec.NotBefore = wholeSecondsFromNow(time.Hour) })
	waitBindings(t, deferred.Name, role)
	eventuallyReady(t, deferred.Name, metav1.ConditionFalse, oriav1alpha1.ReasonPending)
	gone := waitBindings(t, expiring.Name, role)
	t.Logf("bindings deleted %s after expiresAt, under a spec error", gone.Sub(expiresAt.Time).Round(time.Millisecond))
	assert.Less(t, gone.Sub(expiresAt.Time), windowJitter)
	eventuallyReady(t, expiring.Name, metav1.ConditionFalse, oriav1alpha1.ReasonExpired)
}

// TestWindowRefusedBySchema: expiresAt not after notBefore is refused by
// the API server, naming both fields.
func TestWindowRefusedBySchema(t *testing.T) {
	testutil.NeedCluster(t)
	si := newInstance(testutil.UniqueName("si"), "any", nil, nil)
	si.Spec.NotBefore = wholeSecondsFromNow(time.Hour)
	si.Spec.ExpiresAt = si.Spec.NotBefore
	err := k8sClient.Create(context.Background(), si)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.expiresAt must be at least one whole second after spec.notBefore")
}
