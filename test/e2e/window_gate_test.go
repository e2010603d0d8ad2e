package e2e

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/testutil"
)

// Gates (issue 32): a time-bound grant over many namespaces binds, in each,
// one ClusterRole of its own (its gate, binding.GateName) that holds the
// rules only while the window is open. Its bindings are made while it is
// pending; notBefore is one write (the gate filled), and so is expiresAt
// (the gate emptied, before its bindings and then the gate are deleted).

// gateNamespaces is how many namespaces the gated policy selects: more
// than binding.SmallGrant, though a selector alone makes it a fan-out.
const gateNamespaces = 20

// gateBindings returns the namespaces of the instance's RoleBindings, by
// the role each binds ("ClusterRole/name").
func gateBindings(t require.TestingT, instance string) map[string][]string {
	var rbs rbacv1.RoleBindingList
	require.NoError(t, k8sClient.List(context.Background(), &rbs, client.MatchingLabels{oriav1alpha1.LabelScopeInstance: names.LabelValue(instance)}))
	out := map[string][]string{}
	for _, b := range rbs.Items {
		if b.DeletionTimestamp == nil {
			role := b.RoleRef.Kind + "/" + b.RoleRef.Name
			out[role] = append(out[role], b.Namespace)
		}
	}
	return out
}

// getGate reads the gate; nil when it does not exist.
func getGate(t require.TestingT, name string) *rbacv1.ClusterRole {
	role := &rbacv1.ClusterRole{}
	err := k8sClient.Get(context.Background(), client.ObjectKey{Name: name}, role)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return role
}

// gateWrites records, from watches on the gate and on the instance's
// RoleBindings, the resourceVersions of the writes that revoke a gated
// grant: the gate emptied, each binding deleted, the gate deleted.
// resourceVersions are opaque to clients in general; with the one etcd of
// this control plane they are its revisions, which order writes across
// kinds.
type gateWrites struct {
	mu                  sync.Mutex
	emptied, gateGone   uint64
	bindingsGone        []uint64
	stopGate, stopBinds func()
}

// watchGateWrites starts the watches (before oria starts again).
func watchGateWrites(t *testing.T, gate, instance string) *gateWrites {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cluster.Config)
	require.NoError(t, err)
	ctx := context.Background()
	gw, err := cs.RbacV1().ClusterRoles().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + gate})
	require.NoError(t, err)
	bw, err := cs.RbacV1().RoleBindings("").Watch(ctx, metav1.ListOptions{LabelSelector: oriav1alpha1.LabelScopeInstance + "=" + names.LabelValue(instance)})
	require.NoError(t, err)
	w := &gateWrites{stopGate: gw.Stop, stopBinds: bw.Stop}
	t.Cleanup(w.stop)
	rv := func(o metav1.Object) uint64 { n, _ := strconv.ParseUint(o.GetResourceVersion(), 10, 64); return n }
	go func() {
		for ev := range gw.ResultChan() {
			role, ok := ev.Object.(*rbacv1.ClusterRole)
			if !ok {
				continue
			}
			w.mu.Lock()
			switch {
			case ev.Type == watch.Modified && !ownership.GateGrants(role) && w.emptied == 0:
				w.emptied = rv(role)
			case ev.Type == watch.Deleted:
				w.gateGone = rv(role)
			}
			w.mu.Unlock()
		}
	}()
	go func() {
		for ev := range bw.ResultChan() {
			if rb, ok := ev.Object.(*rbacv1.RoleBinding); ok && ev.Type == watch.Deleted {
				w.mu.Lock()
				w.bindingsGone = append(w.bindingsGone, rv(rb))
				w.mu.Unlock()
			}
		}
	}()
	return w
}

func (w *gateWrites) stop() { w.stopGate(); w.stopBinds() }

// assertOrder checks that the gate was emptied before any binding was
// deleted, and deleted after all of them.
func (w *gateWrites) assertOrder(t *testing.T) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		w.mu.Lock()
		defer w.mu.Unlock()
		assert.Len(c, w.bindingsGone, gateNamespaces, "binding deletions seen")
		assert.NotZero(c, w.gateGone, "gate deletion seen")
	}, 10*time.Second, testutil.Interval)
	w.mu.Lock()
	defer w.mu.Unlock()
	require.NotZero(t, w.emptied, "the gate was never emptied: its bindings were deleted while it still granted")
	for _, b := range w.bindingsGone {
		assert.Less(t, w.emptied, b, "a binding deleted before the gate was emptied")
		assert.Less(t, b, w.gateGone, "the gate deleted before one of its bindings")
	}
}

// TestGatedPolicyWindow: an RBACPolicy with a window of 20 s over 20
// selected namespaces compiles to a gated instance. Pending, it has bound
// its empty gate in all 20 namespaces and grants nothing; at notBefore
// access starts in all of them. oria is stopped before expiresAt and
// started after it: access still holds while it is down (only oria
// removes it), and is revoked soon after it starts, the gate emptied
// first, then its bindings and the gate deleted; the policy and its
// instance end Expired.
func TestGatedPolicyWindow(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	began := time.Now()
	selected := map[string]string{"gate-test": testutil.UniqueName("gated")}
	nss := make([]string, gateNamespaces)
	for i := range nss {
		nss[i] = createNamespace(t, "gated", selected)
	}
	crd := extensionWithAPI(t, oriav1alpha1.RBACModeFineGrained)
	group, plural, ext := crd.Spec.Group, crd.Spec.Names.Plural, crd.Labels[oriav1alpha1.LabelOLMOwnerName]
	user := testutil.UniqueName("gated-user")
	access := func(ns string) testutil.Access {
		return testutil.Access{User: user, Verb: "list", Group: group, Resource: plural, Namespace: ns}
	}
	every := make([]testutil.Access, len(nss))
	for i, ns := range nss {
		every[i] = access(ns)
	}
	some := []testutil.Access{access(nss[0]), access(nss[len(nss)/2]), access(nss[len(nss)-1])}

	notBefore := wholeSecondsFromNow(8 * time.Second)
	expiresAt := &metav1.Time{Time: notBefore.Add(20 * time.Second)}
	p := &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("gated")}, Spec: oriav1alpha1.RBACPolicySpec{
		ExtensionName: ext, Access: oriav1alpha1.AccessView, NamespaceSelector: &metav1.LabelSelector{MatchLabels: selected},
		Subjects: []rbacv1.Subject{testutil.User(user)}, APIs: []oriav1alpha1.APIRef{{Group: group, Resource: plural}},
		NotBefore: notBefore, ExpiresAt: expiresAt}}
	require.NoError(t, k8sClient.Create(ctx, p))
	cleanup(t, p)
	policyKey := &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: p.Name}}

	// Pending: the empty gate is bound in every namespace already.
	waitReason(t, policyKey, metav1.ConditionFalse, oriav1alpha1.ReasonPending)
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p))
	require.NotEmpty(t, p.Status.ScopeInstanceName)
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: p.Status.ScopeInstanceName}}
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKeyFromObject(si), si))
	require.True(t, binding.Gated(si.Spec), "the compiled instance is not gated: %+v", si.Spec)
	gate := binding.GateName(si.Name, string(si.UID))
	si, _ = testutil.EventuallyCondition(t, k8sClient, si, testutil.Condition{Type: oriav1alpha1.TypeReady,
		Status: metav1.ConditionFalse, Reason: oriav1alpha1.ReasonPending, Message: []string{gate}})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.ElementsMatch(c, nss, gateBindings(c, si.Name)["ClusterRole/"+gate], "the gate's bindings")
		assert.Len(c, gateBindings(c, si.Name), 1, "the instance binds its gate only")
	}, testutil.Timeout, testutil.Interval)
	role := getGate(t, gate)
	require.NotNil(t, role, "the gate %s does not exist while pending", gate)
	assert.False(t, ownership.GateGrants(role), "the gate grants while pending: %v", role.Rules)
	assert.Equal(t, names.LabelValue(si.Name), role.Labels[oriav1alpha1.LabelScopeInstance])
	assert.Empty(t, si.Status.BoundNamespaces, "nothing is bound while pending")
	for _, a := range some {
		assert.False(t, can(t, a), "access before notBefore: %s", a)
	}
	pendingLeft := time.Until(notBefore.Time)
	require.Positive(t, pendingLeft, "the test was too slow to see the grant pending")

	// notBefore: access in every namespace.
	granted := waitAllowed(t, true, every...)
	assert.False(t, granted.Before(notBefore.Time), "access before notBefore")
	assert.Less(t, granted.Sub(notBefore.Time), windowJitter, "access too long after notBefore")
	waitReason(t, policyKey, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	if role = getGate(t, gate); assert.NotNil(t, role) {
		assert.True(t, ownership.GateGrants(role), "the gate is filled within the window")
	}

	// oria down across expiresAt.
	oria.Stop()
	stopped := time.Now()
	require.True(t, stopped.Before(expiresAt.Time), "the test was too slow: oria stopped after expiresAt")
	oriaLog += ".gate"
	t.Cleanup(func() {
		if oria.Exited() {
			var err error
			oria, err = startOria(ctx)
			require.NoError(t, err)
		}
	})
	time.Sleep(time.Until(expiresAt.Add(3 * time.Second)))
	for _, a := range every {
		assert.True(t, can(t, a), "with oria down, nothing revokes the expired grant: %s", a)
	}
	writes := watchGateWrites(t, gate, si.Name)

	started := time.Now()
	var err error
	oria, err = startOria(ctx)
	require.NoError(t, err)
	ready := time.Since(started)
	revoked := waitAllowed(t, false, every...)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Empty(c, gateBindings(c, si.Name), "the instance's bindings")
		assert.Nil(c, getGate(c, gate), "the gate")
	}, testutil.Timeout, testutil.Interval)
	cleared := time.Since(started)
	assert.Less(t, revoked.Sub(started), 30*time.Second, "revoked within 30 s of the start")
	writes.assertOrder(t)
	waitReason(t, si, metav1.ConditionFalse, oriav1alpha1.ReasonExpired)
	waitReason(t, policyKey, metav1.ConditionFalse, oriav1alpha1.ReasonExpired)

	t.Logf("gated policy over %d namespaces: pending seen %s before notBefore; access %s after notBefore in all; "+
		"oria stopped %s before expiresAt, down %s; ready %s after start, access denied %s after start, bindings and gate gone %s after start; test body %s",
		gateNamespaces, pendingLeft.Round(time.Millisecond), granted.Sub(notBefore.Time).Round(time.Millisecond),
		expiresAt.Sub(stopped).Round(time.Millisecond), started.Sub(stopped).Round(time.Millisecond), ready.Round(time.Millisecond),
		revoked.Sub(started).Round(time.Millisecond), cleared.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}
