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
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/controller/scopeinstance"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/testutil"
)

// Gated grants (binding.Gated): a time-bound instance over many namespaces
// binds its gate, a ClusterRole of its own that holds its template's rules
// only inside the window.

var configMapRules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}}

// grantsNow waits until the answers of a SubjectAccessReview for each of
// checks are want.
func grantsNow(t *testing.T, want bool, checks ...testutil.Access) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, a := range checks {
			ok, err := testutil.Allowed(context.Background(), k8sClient, a)
			assert.NoError(c, err)
			assert.Equal(c, want, ok, "%+v", a)
		}
	}, testutil.Timeout, 20*time.Millisecond)
}

// denied reports now that no check is allowed.
func denied(t *testing.T, checks ...testutil.Access) {
	t.Helper()
	for _, a := range checks {
		ok, err := testutil.Allowed(context.Background(), k8sClient, a)
		require.NoError(t, err)
		assert.False(t, ok, "%+v allowed", a)
	}
}

// gateOf returns the instance's gate (nil when it has none).
func gateOf(t require.TestingT, si *oriav1alpha1.ScopeInstance) *rbacv1.ClusterRole {
	name := binding.GateName(si.Name, string(si.UID))
	gate := &rbacv1.ClusterRole{}
	if notFound(name, "", gate) {
		return nil
	}
	return gate
}

// gatedFixture is a selector over three namespaces, a template with a
// referenced role (pods) and an inline one (configmaps) for alice, and the
// accesses it grants.
func gatedFixture(t *testing.T) (label string, nss []string, tmpl *oriav1alpha1.ScopeTemplate, role string, checks []testutil.Access) {
	label = testutil.UniqueName("gated")
	for range 3 {
		nss = append(nss, namespace(t, "gt", map[string]string{label: "yes"}))
	}
	role = podReader(t)
	tmpl = testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: role},
		{GenerateName: "cm", Rules: configMapRules}}, testutil.User("alice"))
	create(t, tmpl)
	for _, ns := range nss {
		checks = append(checks, testutil.Access{User: "alice", Verb: "list", Resource: "pods", Namespace: ns},
			testutil.Access{User: "alice", Verb: "list", Resource: "configmaps", Namespace: ns})
	}
	return label, nss, tmpl, role, checks
}

// TestGatedGrant: a time-bound selector's bindings are made while it is
// Pending, to its empty gate (nothing is granted); the gate is filled at
// notBefore and emptied at expiresAt, then the bindings and the gate go.
// Inside the window the gate follows its roles and is put right when
// someone changes it.
func TestGatedGrant(t *testing.T) {
	testutil.NeedCluster(t)
	label, nss, tmpl, role, checks := gatedFixture(t)
	notBefore := wholeSecondsFromNow(6 * time.Second)
	expiresAt := &metav1.Time{Time: notBefore.Add(15 * time.Second)}
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, nil, matchLabels(label, "yes"))
	si.Spec.NotBefore, si.Spec.ExpiresAt = notBefore, expiresAt
	create(t, si)
	si = get(t, si.Name, "", &oriav1alpha1.ScopeInstance{})
	gateName := binding.GateName(si.Name, string(si.UID))

	// Pending: bound to the empty gate in every namespace, nothing granted.
	eventuallyBoundIn(t, si.Name, gateName, nss...)
	got := eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonPending)
	require.True(t, time.Now().Before(notBefore.Time), "the test was too slow to see the instance pending")
	assert.Contains(t, meta.FindStatusCondition(got.Status.Conditions, oriav1alpha1.TypeReady).Message, gateName)
	assert.Zero(t, got.Status.BoundNamespaceCount, "nothing is granted before notBefore")
	gate := gateOf(t, si)
	require.NotNil(t, gate)
	assert.False(t, ownership.GateGrants(gate), "%v", gate.Rules)
	assert.ElementsMatch(t, []string{role, binding.RoleName(tmpl.Name, tmpl.Spec.ClusterRoles[1])}, binding.GateRoles(gate))
	denied(t, checks...)

	// notBefore: every namespace at once.
	grantsNow(t, true, checks...)
	opened := time.Now()
	t.Logf("access granted %s after notBefore", opened.Sub(notBefore.Time).Round(time.Millisecond))
	assert.False(t, opened.Before(notBefore.Time), "granted before notBefore")
	assert.Less(t, opened.Sub(notBefore.Time), windowJitter)
	got = eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	assert.Contains(t, meta.FindStatusCondition(got.Status.Conditions, oriav1alpha1.TypeReady).Message, gateName)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.ElementsMatch(c, nss, get(c, si.Name, "", &oriav1alpha1.ScopeInstance{}).Status.BoundNamespaces)
	}, testutil.Timeout, testutil.Interval)

	// The referenced role narrowed: the gate follows (revocation lands).
	podRole := get(t, role, "", &rbacv1.ClusterRole{})
	narrowed := time.Now()
	update(t, podRole, func() { podRole.Rules = nil })
	grantsNow(t, false, checks[0])
	t.Logf("the gate followed its narrowed role in %s", time.Since(narrowed).Round(time.Millisecond))
	assert.Less(t, time.Since(narrowed), windowJitter)
	update(t, podRole, func() { podRole.Rules = podRules })
	grantsNow(t, true, checks[0])

	// Someone widens the gate, or makes an aggregated role select it: put
	// right.
	gate = gateOf(t, si)
	update(t, gate, func() {
		gate.Rules = append(gate.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
		gate.Labels[oriav1alpha1.LabelAggregateToView] = "true"
	})
	grantsNow(t, false, testutil.Access{User: "alice", Verb: "get", Resource: "secrets", Namespace: nss[0]})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NotContains(c, gateOf(c, si).Labels, oriav1alpha1.LabelAggregateToView)
	}, testutil.Timeout, testutil.Interval)

	// expiresAt: every namespace at once, then the bindings and the gate go.
	grantsNow(t, false, checks...)
	closed := time.Now()
	t.Logf("access revoked %s after expiresAt", closed.Sub(expiresAt.Time).Round(time.Millisecond))
	assert.False(t, closed.Before(expiresAt.Time), "revoked before expiresAt")
	assert.Less(t, closed.Sub(expiresAt.Time), windowJitter)
	eventuallyBoundIn(t, si.Name, gateName)
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Nil(c, gateOf(c, si)) }, testutil.Timeout, testutil.Interval)
	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonExpired)
	testutil.EventuallyEvents(t, k8sClient, "ScopeInstance", si.Name, scopeinstance.EventAccessGranted, scopeinstance.EventAccessExpired)
}

// TestGateNameTaken: a role created under the name of an instance's gate
// before the instance became gated is someone else's: nothing is bound to
// it (what it grants never reaches the subjects) and the instance reports
// Conflict. Without the window, the instance binds its roles again.
func TestGateNameTaken(t *testing.T) {
	testutil.NeedCluster(t)
	label, nss, tmpl, role, checks := gatedFixture(t)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, nil, matchLabels(label, "yes"))
	create(t, si)
	eventuallyBoundIn(t, si.Name, role, nss...)
	si = get(t, si.Name, "", &oriav1alpha1.ScopeInstance{})
	squatted := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: binding.GateName(si.Name, string(si.UID))},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}}
	create(t, squatted)

	update(t, si, func() { si.Spec.ExpiresAt = wholeSecondsFromNow(time.Hour) })
	got := eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonConflict)
	assert.Contains(t, meta.FindStatusCondition(got.Status.Conditions, oriav1alpha1.TypeReady).Message, squatted.Name)
	eventuallyBoundIn(t, si.Name, role)
	eventuallyBoundIn(t, si.Name, squatted.Name)
	denied(t, testutil.Access{User: "alice", Verb: "get", Resource: "secrets", Namespace: nss[0]})
	grantsNow(t, false, checks...)
	assert.Equal(t, "secrets", get(t, squatted.Name, "", &rbacv1.ClusterRole{}).Rules[0].Resources[0], "someone else's role is left alone")

	update(t, si, func() { si.Spec.ExpiresAt = nil })
	grantsNow(t, true, checks...)
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
}

// TestGateReplaced: a gated grant whose window is removed binds its roles
// again, with no gap, and its gate goes; deleting a gated instance revokes
// through its gate and removes it.
func TestGateReplaced(t *testing.T) {
	testutil.NeedCluster(t)
	label, nss, tmpl, role, checks := gatedFixture(t)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, nil, matchLabels(label, "yes"))
	si.Spec.ExpiresAt = wholeSecondsFromNow(time.Hour)
	create(t, si)
	grantsNow(t, true, checks...)
	si = get(t, si.Name, "", &oriav1alpha1.ScopeInstance{})
	require.NotNil(t, gateOf(t, si))

	ctx, stop := context.WithCancel(context.Background())
	gaps := make(chan int, 1)
	go func() { // alice's access, polled while the bindings are replaced
		n := 0
		for ctx.Err() == nil {
			if ok, err := testutil.Allowed(ctx, k8sClient, checks[0]); err == nil && !ok {
				n++
			}
			time.Sleep(10 * time.Millisecond)
		}
		gaps <- n
	}()
	update(t, si, func() { si.Spec.ExpiresAt = nil })
	eventuallyBoundIn(t, si.Name, role, nss...)
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Nil(c, gateOf(c, si)) }, testutil.Timeout, testutil.Interval)
	stop()
	assert.Zero(t, <-gaps, "access lapsed while the gate's bindings were replaced")
	grantsNow(t, true, checks...)

	// Gated again, then deleted.
	update(t, si, func() { si.Spec.ExpiresAt = wholeSecondsFromNow(time.Hour) })
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		g := gateOf(c, si)
		if assert.NotNil(c, g) {
			assert.True(c, ownership.GateGrants(g), "%v", g.Rules)
		}
		assert.Empty(c, roleBindingNamespaces(c, si.Name, role))
	}, testutil.Timeout, testutil.Interval)
	require.NoError(t, k8sClient.Delete(context.Background(), si, client.PropagationPolicy(metav1.DeletePropagationOrphan)))
	grantsNow(t, false, checks...)
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Nil(c, gateOf(c, si)) }, testutil.Timeout, testutil.Interval)
}

// TestGateThroughSpecError: a gated grant whose template turns invalid
// keeps the access of the roles it still names (a spec error revokes
// nothing by surprise), but a later notBefore ends it at once through the
// gate, bindings kept for the new window, and its expiry lands all the
// same: the gate is emptied, then it and its bindings go.
func TestGateThroughSpecError(t *testing.T) {
	testutil.NeedCluster(t)
	label, nss, tmpl, _, checks := gatedFixture(t)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, nil, matchLabels(label, "yes"))
	si.Spec.ExpiresAt = wholeSecondsFromNow(time.Hour)
	create(t, si)
	grantsNow(t, true, checks...)
	si = get(t, si.Name, "", &oriav1alpha1.ScopeInstance{})
	gateName := binding.GateName(si.Name, string(si.UID))

	// A subject no binding can name makes the template invalid.
	update(t, tmpl, func() {
		tmpl.Spec.BindingTemplate.Subjects = append(tmpl.Spec.BindingTemplate.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "Not_A_Name", Namespace: "x"})
	})
	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonTemplateInvalid)
	pods := []testutil.Access{checks[0], checks[2], checks[4]}
	grantsNow(t, true, pods...)

	update(t, si, func() { si.Spec.NotBefore = wholeSecondsFromNow(30 * time.Minute) })
	grantsNow(t, false, checks...)
	assert.ElementsMatch(t, nss, roleBindingNamespaces(t, si.Name, gateName), "the bindings stay for the window ahead")
	assert.False(t, ownership.GateGrants(gateOf(t, si)))

	expiresAt := wholeSecondsFromNow(3 * time.Second)
	update(t, si, func() { si.Spec.NotBefore, si.Spec.ExpiresAt = nil, expiresAt })
	eventuallyBoundIn(t, si.Name, gateName)
	gone := time.Now()
	t.Logf("bindings deleted %s after expiresAt, under a spec error", gone.Sub(expiresAt.Time).Round(time.Millisecond))
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Nil(c, gateOf(c, si)) }, testutil.Timeout, testutil.Interval)
	denied(t, checks...)
	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonExpired)
}

// TestGatedPendingSpecError: a gated grant reads its spec before its
// window (its bindings are made then), so a spec error shows while it is
// pending, and nothing is bound.
func TestGatedPendingSpecError(t *testing.T) {
	testutil.NeedCluster(t)
	si := newInstance(testutil.UniqueName("si"), testutil.UniqueName("missing"), nil, matchLabels(testutil.UniqueName("gated"), "yes"))
	si.Spec.NotBefore = wholeSecondsFromNow(time.Hour)
	create(t, si)
	got := eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonTemplateNotFound)
	assert.Contains(t, meta.FindStatusCondition(got.Status.Conditions, oriav1alpha1.TypeReady).Message, "nothing is granted before spec.notBefore")
	assert.Nil(t, gateOf(t, got), "a grant with a spec error creates no gate")
}

// TestGateNeverFilledWithoutItsTemplate (issue 38, case 2): the template of
// a pending gated grant is deleted, and someone who may patch ClusterRoles
// sets the gate's annotation to admin and view (cluster-admin here). At notBefore the gate
// stays empty: what a gate stands for comes from the template the guard
// checked, never from the gate's own metadata.
func TestGateNeverFilledWithoutItsTemplate(t *testing.T) {
	testutil.NeedCluster(t)
	label, _, tmpl, _, checks := gatedFixture(t)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, nil, matchLabels(label, "yes"))
	notBefore := wholeSecondsFromNow(4 * time.Second)
	si.Spec.NotBefore, si.Spec.ExpiresAt = notBefore, wholeSecondsFromNow(time.Hour)
	create(t, si)
	si = get(t, si.Name, "", &oriav1alpha1.ScopeInstance{})
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.NotNil(c, gateOf(c, si)) }, testutil.Timeout, testutil.Interval)

	require.NoError(t, k8sClient.Delete(context.Background(), tmpl))
	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonTemplateNotFound)
	gateName := binding.GateName(si.Name, string(si.UID))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Empty(c, roleBindingNamespaces(c, si.Name, gateName), "a grant whose template is gone binds nothing")
	}, testutil.Timeout, testutil.Interval)
	// Patched once before notBefore and once after (each write to the gate
	// brings the instance back to a reconcile).
	for _, at := range []time.Time{time.Now(), notBefore.Add(time.Second)} {
		time.Sleep(time.Until(at))
		gate := gateOf(t, si)
		patch := client.MergeFrom(gate.DeepCopy())
		// cluster-admin: the integration suite runs no aggregation
		// controller, so admin and view have no rules here.
		gate.Annotations[oriav1alpha1.AnnotationGateRoles] = "cluster-admin,view"
		gate.Annotations["touched"] = at.String()
		require.NoError(t, k8sClient.Patch(context.Background(), gate, patch))
	}
	time.Sleep(2 * time.Second)
	g := gateOf(t, si)
	assert.False(t, ownership.GateGrants(g), "a gate without its template gained rules at notBefore (standing for %s): %v", g.Annotations[oriav1alpha1.AnnotationGateRoles], g.Rules)
	secrets := testutil.Access{User: "alice", Verb: "get", Resource: "secrets", Namespace: checks[0].Namespace}
	denied(t, append(checks, secrets)...)
}
