package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller/scopeinstance"
	"github.com/operator-framework/oria/internal/testutil"
)

// Time-bound grants (issue 32): RBACPolicies and ScopeInstances with
// spec.notBefore and spec.expiresAt, windows of a few seconds, access
// checked with SubjectAccessReviews. The machine is slow and shared: "at
// the instant" is checked within windowJitter, and the latencies measured
// are logged.

const windowJitter = 3 * time.Second

// wholeSecondsFromNow is now plus d in whole seconds, as the API stores it.
func wholeSecondsFromNow(d time.Duration) *metav1.Time {
	return &metav1.Time{Time: time.Now().Add(d).Truncate(time.Second)}
}

// waitAllowed polls the access checks every 50 ms until each has the
// wanted answer, and returns when they first all did.
func waitAllowed(t *testing.T, want bool, checks ...testutil.Access) time.Time {
	t.Helper()
	var seen time.Time
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		all := true
		for _, a := range checks {
			all = assert.Equal(c, want, can(c, a), "%s", a) && all
		}
		if all {
			seen = time.Now()
		}
	}, testutil.Timeout, 50*time.Millisecond)
	return seen
}

// waitReason waits until the Ready condition of obj (an RBACPolicy or a
// ScopeInstance, by name) has reason, for its current generation.
func waitReason(t *testing.T, obj client.Object, status metav1.ConditionStatus, reason string) {
	t.Helper()
	testutil.EventuallyCondition(t, k8sClient, obj, testutil.Condition{Type: oriav1alpha1.TypeReady, Status: status, Reason: reason})
}

// expiresColumn returns the Expires cell of the table `kubectl get`
// shows for the named object of one of oria's resources.
func expiresColumn(t *testing.T, resource, name string) any {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cluster.Config)
	require.NoError(t, err)
	table := &metav1.Table{}
	require.NoError(t, cs.RESTClient().Get().AbsPath("/apis", oriav1alpha1.GroupVersion.String(), resource, name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(context.Background()).Into(table))
	require.Len(t, table.Rows, 1)
	for i, c := range table.ColumnDefinitions {
		if c.Name == "Expires" {
			return table.Rows[0].Cells[i]
		}
	}
	t.Fatalf("%s has no Expires column", resource)
	return nil
}

// TestTimeBoundGrants: an RBACPolicy and a ScopeInstance with the same
// window of a few seconds are Pending (no access), Bound (access, from
// notBefore), then Expired (no access, from expiresAt), each step checked
// with SubjectAccessReviews, with Normal events at the grant and at the
// expiry.
func TestTimeBoundGrants(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns := createNamespace(t, "tb", nil)
	crd := extensionWithAPI(t, oriav1alpha1.RBACModeFineGrained)
	group, plural, ext := crd.Spec.Group, crd.Spec.Names.Plural, crd.Labels[oriav1alpha1.LabelOLMOwnerName]
	byPolicy, byInstance := testutil.UniqueName("tb-policy"), testutil.UniqueName("tb-instance")

	notBefore := wholeSecondsFromNow(10 * time.Second)
	expiresAt := &metav1.Time{Time: notBefore.Add(10 * time.Second)}
	p := &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("tb")}, Spec: oriav1alpha1.RBACPolicySpec{
		ExtensionName: ext, Access: oriav1alpha1.AccessView, Namespaces: []string{ns}, Subjects: []rbacv1.Subject{testutil.User(byPolicy)},
		APIs: []oriav1alpha1.APIRef{{Group: group, Resource: plural}}, NotBefore: notBefore, ExpiresAt: expiresAt}}
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tb"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User(byInstance))
	si := scopeInstance(tmpl.Name, tmpl.Name, ns)
	si.Spec.NotBefore, si.Spec.ExpiresAt = notBefore, expiresAt
	for _, o := range []client.Object{p, tmpl, si} {
		require.NoError(t, k8sClient.Create(ctx, o))
	}
	cleanup(t, p, tmpl, si)
	checks := []testutil.Access{
		{User: byPolicy, Verb: "list", Group: group, Resource: plural, Namespace: ns},
		{User: byInstance, Verb: "list", Resource: "pods", Namespace: ns},
	}

	waitReason(t, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: p.Name}}, metav1.ConditionFalse, oriav1alpha1.ReasonPending)
	waitReason(t, &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: si.Name}}, metav1.ConditionFalse, oriav1alpha1.ReasonPending)
	require.True(t, time.Now().Before(notBefore.Time), "the test was too slow to see the grants pending")
	stamp := expiresAt.UTC().Format(time.RFC3339)
	assert.Equal(t, stamp, expiresColumn(t, "rbacpolicies", p.Name), "kubectl get rbacpolicy: EXPIRES")
	assert.Equal(t, stamp, expiresColumn(t, "scopeinstances", si.Name), "kubectl get scopeinstance: EXPIRES")
	for _, a := range checks {
		assert.False(t, can(t, a), "no access before notBefore: %s", a)
	}

	granted := waitAllowed(t, true, checks...)
	t.Logf("time-bound grants: access %s after notBefore", granted.Sub(notBefore.Time).Round(time.Millisecond))
	assert.False(t, granted.Before(notBefore.Time), "access before notBefore")
	assert.Less(t, granted.Sub(notBefore.Time), windowJitter, "access too long after notBefore")
	waitReason(t, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: p.Name}}, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	waitReason(t, &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: si.Name}}, metav1.ConditionTrue, oriav1alpha1.ReasonBound)

	revoked := waitAllowed(t, false, checks...)
	t.Logf("time-bound grants: access revoked %s after expiresAt", revoked.Sub(expiresAt.Time).Round(time.Millisecond))
	assert.False(t, revoked.Before(expiresAt.Time), "revoked before expiresAt")
	assert.Less(t, revoked.Sub(expiresAt.Time), windowJitter, "revoked too long after expiresAt")
	waitReason(t, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: p.Name}}, metav1.ConditionFalse, oriav1alpha1.ReasonExpired)
	waitReason(t, &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: si.Name}}, metav1.ConditionFalse, oriav1alpha1.ReasonExpired)
	testutil.EventuallyEvents(t, k8sClient, "RBACPolicy", p.Name, scopeinstance.EventAccessGranted, scopeinstance.EventAccessExpired)
	testutil.EventuallyEvents(t, k8sClient, "ScopeInstance", si.Name, scopeinstance.EventAccessGranted, scopeinstance.EventAccessExpired)
}

// TestTimeBoundGrantsAcrossADownOria: oria is stopped while one instance
// is bound and another pending; expiresAt and notBefore pass while it is
// down (the expired grant's binding still grants: only oria removes it);
// started again, it revokes the expired grant and binds the pending one at
// once (the times come from the spec, not from memory).
func TestTimeBoundGrantsAcrossADownOria(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns := createNamespace(t, "tbdown", nil)
	expiring, starting := testutil.UniqueName("tb-expiring"), testutil.UniqueName("tb-starting")
	grant := func(user string, notBefore, expiresAt *metav1.Time) *oriav1alpha1.ScopeInstance {
		tmpl := testutil.ScopeTemplate(testutil.UniqueName("tbdown"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User(user))
		si := scopeInstance(tmpl.Name, tmpl.Name, ns)
		si.Spec.NotBefore, si.Spec.ExpiresAt = notBefore, expiresAt
		require.NoError(t, k8sClient.Create(ctx, tmpl))
		require.NoError(t, k8sClient.Create(ctx, si))
		cleanup(t, tmpl, si)
		return si
	}
	list := func(user string) testutil.Access {
		return testutil.Access{User: user, Verb: "list", Resource: "pods", Namespace: ns}
	}
	boundary := wholeSecondsFromNow(15 * time.Second)
	expired := grant(expiring, nil, boundary)
	pending := grant(starting, boundary, nil)
	waitAllowed(t, true, list(expiring))
	waitReason(t, &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: pending.Name}}, metav1.ConditionFalse, oriav1alpha1.ReasonPending)

	oria.Stop()
	stopped := time.Now()
	require.True(t, stopped.Before(boundary.Time), "the test was too slow: oria stopped after the boundary")
	oriaLog += ".window"
	t.Cleanup(func() {
		if oria.Exited() {
			var err error
			oria, err = startOria(ctx)
			require.NoError(t, err)
		}
	})
	time.Sleep(time.Until(boundary.Add(2 * time.Second)))
	assert.True(t, can(t, list(expiring)), "with oria down, nothing removes the expired grant's binding")
	assert.False(t, can(t, list(starting)), "with oria down, nothing binds the pending grant")

	started := time.Now()
	var err error
	oria, err = startOria(ctx)
	require.NoError(t, err)
	ready := time.Since(started)
	revoked := waitAllowed(t, false, list(expiring))
	granted := waitAllowed(t, true, list(starting))
	t.Logf("oria down across the boundary for %s: ready %s after start; expired grant revoked %s, pending grant bound %s after start",
		started.Sub(stopped).Round(time.Millisecond), ready.Round(time.Millisecond),
		revoked.Sub(started).Round(time.Millisecond), granted.Sub(started).Round(time.Millisecond))
	assert.Less(t, revoked.Sub(started), ready+15*time.Second, "revoked within seconds of the start")
	waitReason(t, &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: expired.Name}}, metav1.ConditionFalse, oriav1alpha1.ReasonExpired)
	waitReason(t, &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: pending.Name}}, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	testutil.EventuallyEvents(t, k8sClient, "ScopeInstance", expired.Name, scopeinstance.EventAccessExpired)
}

// TestGuardWindowDelegated: a delegated user D (who holds nothing in
// victim) may not extend an admin's time-bound grant there (a later or no
// expiresAt, an earlier notBefore: each a grant D could not make), but may
// shorten it, which lands at the new expiresAt.
func TestGuardWindowDelegated(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	_, _, as := sequenceUser(t, "windowed")
	victim := createNamespace(t, "victim", nil)
	temp := testutil.UniqueName("temp")
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tbguard"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User(temp))
	si := scopeInstance(tmpl.Name, tmpl.Name, victim)
	si.Spec.ExpiresAt = wholeSecondsFromNow(time.Hour)
	for _, o := range []client.Object{tmpl, si} {
		require.NoError(t, k8sClient.Create(ctx, o))
	}
	cleanup(t, tmpl, si)
	list := testutil.Access{User: temp, Verb: "list", Resource: "pods", Namespace: victim}
	waitAllowed(t, true, list)

	later := wholeSecondsFromNow(2 * time.Hour)
	refused(t, userUpdate(t, as, si, func() { si.Spec.ExpiresAt = later }), `may not bind ClusterRole "view"`, "widens the grant's window")
	refused(t, userUpdate(t, as, si, func() { si.Spec.ExpiresAt = nil }), `may not bind ClusterRole "view"`)
	other := scopeInstance(testutil.UniqueName("tbguard-later"), tmpl.Name, victim)
	other.Spec.NotBefore = wholeSecondsFromNow(time.Hour)
	require.NoError(t, k8sClient.Create(ctx, other))
	cleanup(t, other)
	refused(t, userUpdate(t, as, other, func() { other.Spec.NotBefore = wholeSecondsFromNow(time.Minute) }), `may not bind ClusterRole "view"`)

	soon := wholeSecondsFromNow(5 * time.Second)
	require.NoError(t, userUpdate(t, as, si, func() { si.Spec.ExpiresAt = soon }), "shortening a grant is a revocation: admitted for anyone who may update the object")
	revoked := waitAllowed(t, false, list)
	t.Logf("D's shortened expiresAt: access revoked %s after it", revoked.Sub(soon.Time).Round(time.Millisecond))
	assert.False(t, revoked.Before(soon.Time), "revoked before the new expiresAt")
	assert.Less(t, revoked.Sub(soon.Time), windowJitter)
	waitReason(t, &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: si.Name}}, metav1.ConditionFalse, oriav1alpha1.ReasonExpired)
}

// temporarySample is the case of config/samples/rbacpolicy-temporary.yaml
// (TestEachSampleAlone): as written its window lies in the past, so it is
// Expired at once and grants nothing; the user guide's patch (no
// notBefore, expiresAt two hours from now) grants alice edit in team-a.
func temporarySample(t *testing.T) {
	fineGrainedArgocd(t)
	alice := testutil.Access{User: "alice", Verb: "create", Group: "argoproj.io", Resource: "applications", Namespace: "team-a"}
	applySample(t, "rbacpolicy-temporary.yaml")
	p := &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: "argocd-alice-temporary"}}
	waitReason(t, p, metav1.ConditionFalse, oriav1alpha1.ReasonExpired)
	eventuallyAccess(t, false, alice)
	patch := fmt.Appendf(nil, `{"spec":{"notBefore":null,"expiresAt":%q}}`, time.Now().Add(2*time.Hour).UTC().Format(time.RFC3339))
	require.NoError(t, k8sClient.Patch(context.Background(), p, client.RawPatch(types.MergePatchType, patch)))
	waitReason(t, p, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	eventuallyAccess(t, true, alice)
}
