package rbacpolicy_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// windowJitter: "at the instant" means within this much of it on a slow,
// shared machine.
const windowJitter = 3 * time.Second

func wholeSecondsFromNow(d time.Duration) *metav1.Time {
	return &metav1.Time{Time: time.Now().Add(d).Truncate(time.Second)}
}

// TestTimeBoundPolicy: a policy with a window of a few seconds compiles to
// an instance carrying that window; with the binding layer running, the
// policy is Pending (no access), Bound with the time left (access), then
// Expired (no access), each within a few seconds of its instant.
func TestTimeBoundPolicy(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	_, stop, err := testutil.StartManager(mgr.GetConfig(), bindingLayer)
	require.NoError(t, err)
	t.Cleanup(stop)

	ext, group := installed(t, oriav1alpha1.RBACModeFineGrained, "window", "boxes")
	ns := testutil.CreateNamespace(t, k8sClient, "tb", nil)
	user := testutil.UniqueName("temp")
	notBefore := wholeSecondsFromNow(6 * time.Second)
	expiresAt := &metav1.Time{Time: notBefore.Add(6 * time.Second)}
	p := newPolicy(t, ext.Name, oriav1alpha1.AccessView, func(s *oriav1alpha1.RBACPolicySpec) {
		s.Subjects = []rbacv1.Subject{testutil.User(user)}
		s.Namespaces = []string{ns}
		s.NotBefore, s.ExpiresAt = notBefore, expiresAt
	})
	list := testutil.Access{User: user, Verb: "list", Group: group, Resource: "boxes", Namespace: ns}
	allowed := func(c require.TestingT) bool {
		ok, err := testutil.Allowed(ctx, k8sClient, list)
		require.NoError(c, err)
		return ok
	}
	// waitAccess waits until the access check says want, polling every 20
	// ms, and returns when it first did.
	waitAccess := func(want bool) time.Time {
		var seen time.Time
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			if assert.Equal(c, want, allowed(c)) {
				seen = time.Now()
			}
		}, testutil.Timeout, 20*time.Millisecond)
		return seen
	}

	_, si := compiled(p.Name)
	si = testutil.EventuallyGet(t, k8sClient, si)
	assert.True(t, si.Spec.NotBefore.Equal(notBefore) && si.Spec.ExpiresAt.Equal(expiresAt),
		"the compiled instance carries the policy's window: %v %v", si.Spec.NotBefore, si.Spec.ExpiresAt)
	waitReady(t, p.Name, oriav1alpha1.ReasonPending)
	require.True(t, time.Now().Before(notBefore.Time), "the test was too slow to see the policy pending")
	assert.False(t, allowed(t), "no access before notBefore")

	granted := waitAccess(true)
	t.Logf("access %s after notBefore", granted.Sub(notBefore.Time).Round(time.Millisecond))
	assert.Less(t, granted.Sub(notBefore.Time), windowJitter)
	waitMessage(t, p.Name, oriav1alpha1.ReasonBound, "until "+expiresAt.UTC().Format(time.RFC3339))
	assert.NotContains(t, readyMessage(waitReady(t, p.Name, oriav1alpha1.ReasonBound)), "left)", "a status message holds instants, never a duration")

	revoked := waitAccess(false)
	t.Logf("access revoked %s after expiresAt", revoked.Sub(expiresAt.Time).Round(time.Millisecond))
	assert.False(t, revoked.Before(expiresAt.Time), "revoked before expiresAt")
	assert.Less(t, revoked.Sub(expiresAt.Time), windowJitter)
	got := waitReady(t, p.Name, oriav1alpha1.ReasonExpired)
	assert.Zero(t, got.Status.BoundNamespaceCount)
}

// TestPolicyWindowNarrowedUnderASpecError: a policy with a spec error keeps
// its grant in force (policy.Narrow), but an earlier expiresAt reaches the
// compiled instance at once; a later one waits for a valid spec.
func TestPolicyWindowNarrowedUnderASpecError(t *testing.T) {
	testutil.NeedCluster(t)
	ext, _ := installed(t, oriav1alpha1.RBACModeFineGrained, "narrowwin", "boxes")
	far := wholeSecondsFromNow(2 * time.Hour)
	p := newPolicy(t, ext.Name, oriav1alpha1.AccessView, func(s *oriav1alpha1.RBACPolicySpec) { s.ExpiresAt = far })
	markInstance(t, p.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound, "ok", "team-a")
	waitReady(t, p.Name, oriav1alpha1.ReasonBound)

	instanceExpiresAt := func(c require.TestingT) *metav1.Time {
		_, si := compiled(p.Name)
		require.NoError(c, k8sClient.Get(context.Background(), client.ObjectKeyFromObject(si), si))
		return si.Spec.ExpiresAt
	}
	sooner := wholeSecondsFromNow(time.Hour)
	testutil.Update(t, k8sClient, p, func() {
		p.Spec.Subjects = append(p.Spec.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "no-namespace"})
		p.Spec.ExpiresAt = sooner
	})
	waitReady(t, p.Name, oriav1alpha1.ReasonInvalidSubject)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.True(c, instanceExpiresAt(c).Equal(sooner), "the earlier expiresAt reaches the instance")
	}, testutil.Timeout, testutil.Interval)

	testutil.Update(t, k8sClient, p, func() { p.Spec.ExpiresAt = wholeSecondsFromNow(3 * time.Hour) })
	waitReady(t, p.Name, oriav1alpha1.ReasonInvalidSubject) // of the generation with the later expiresAt
	assert.True(t, instanceExpiresAt(t).Equal(sooner), "a later expiresAt waits for a valid spec")
}

// TestExpiredPolicyWithoutExtension: a policy that compiles to nothing (its
// extension does not exist) still says Expired once its window has passed.
func TestExpiredPolicyWithoutExtension(t *testing.T) {
	testutil.NeedCluster(t)
	expiresAt := wholeSecondsFromNow(3 * time.Second)
	p := newPolicy(t, testutil.UniqueName("no-such-ext"), oriav1alpha1.AccessView, func(s *oriav1alpha1.RBACPolicySpec) { s.ExpiresAt = expiresAt })
	waitReady(t, p.Name, oriav1alpha1.ReasonExtensionNotFound)
	waitMessage(t, p.Name, oriav1alpha1.ReasonExpired, "ExtensionNotFound")
}
