package rbacpolicy_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestNarrowingLandsOnInvalidPolicy (issue 29, case 1, RBACPolicy): D adds a
// ServiceAccount without a namespace to an admin's policy that grants D view
// in [victim, d-ns]; the policy turns InvalidSubject and keeps its grant.
// The admin then narrows spec.namespaces to [d-ns]: D loses access in
// victim within seconds (measured from the admin's write to the
// SubjectAccessReview that shows it), and keeps it in d-ns. Removing D from
// the subjects revokes the rest the same way.
//
// (No guard runs in this suite, so the invalid write is admitted as it was
// before the guard refused spec errors; test/e2e shows the refusal.)
func TestNarrowingLandsOnInvalidPolicy(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	// The binding layer's controllers, for this test only, so that access
	// can be checked with SubjectAccessReviews.
	_, stop, err := testutil.StartManager(mgr.GetConfig(), bindingLayer)
	require.NoError(t, err)
	t.Cleanup(stop)

	ext, group := installed(t, oriav1alpha1.RBACModeFineGrained, "revoke", "boxes")
	victim := testutil.CreateNamespace(t, k8sClient, "victim", nil)
	dns := testutil.CreateNamespace(t, k8sClient, "d-ns", nil)
	d := testutil.UniqueName("d")
	p := newPolicy(t, ext.Name, oriav1alpha1.AccessView, func(s *oriav1alpha1.RBACPolicySpec) {
		s.Subjects = []rbacv1.Subject{testutil.User(d), testutil.User("admin-team")}
		s.Namespaces = []string{victim, dns}
	})
	list := func(ns string) testutil.Access {
		return testutil.Access{User: d, Verb: "list", Group: group, Resource: "boxes", Namespace: ns}
	}
	can := func(c require.TestingT, a testutil.Access) bool {
		ok, err := testutil.Allowed(ctx, k8sClient, a)
		require.NoError(c, err)
		return ok
	}
	waitReady(t, p.Name, oriav1alpha1.ReasonBound)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.True(c, can(c, list(victim)))
		assert.True(c, can(c, list(dns)))
	}, testutil.Timeout, testutil.Interval)

	// D's write: the spec is invalid, the grant stays.
	testutil.Update(t, k8sClient, p, func() {
		p.Spec.Subjects = append(p.Spec.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "bot"})
	})
	waitReady(t, p.Name, oriav1alpha1.ReasonInvalidSubject)
	assert.True(t, can(t, list(victim)), "an invalid edit alone revoked the grant")

	// The admin narrows the namespaces.
	measure := func(what string, a testutil.Access, change func()) {
		t.Helper()
		start := time.Now()
		testutil.Update(t, k8sClient, p, change)
		require.Eventually(t, func() bool { return !can(t, a) }, testutil.Timeout, 10*time.Millisecond, "%s is still allowed", a)
		elapsed := time.Since(start)
		t.Logf("%s: the revocation landed %v after the admin's write (the policy still says %s)", what, elapsed.Round(time.Millisecond), oriav1alpha1.ReasonInvalidSubject)
		assert.Less(t, elapsed, 5*time.Second, "a revocation lands within seconds")
	}
	measure("namespaces narrowed to [d-ns]", list(victim), func() { p.Spec.Namespaces = []string{dns} })
	assert.True(t, can(t, list(dns)), "what the spec still allows stays")
	testutil.EventuallyEvents(t, k8sClient, "RBACPolicy", p.Name, "Narrowed")

	// The admin removes D.
	measure("D removed from the subjects", list(dns), func() {
		p.Spec.Subjects = slices.DeleteFunc(p.Spec.Subjects, func(s rbacv1.Subject) bool { return s.Name == d })
	})
	assert.True(t, can(t, testutil.Access{User: "admin-team", Verb: "list", Group: group, Resource: "boxes", Namespace: dns}),
		"the other subject keeps what the spec still allows")
}
