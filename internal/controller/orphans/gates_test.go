package orphans_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/controller/orphans"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/testutil"
)

// gated makes, as the ScopeInstance controller makes them for a time-bound
// grant over many namespaces, si's gate (open: holding the pod reader
// rules) and its RoleBindings in nss, for user; controlled false leaves out
// the controller references (as the garbage collector leaves them when the
// instance is deleted with orphaning).
func gated(t *testing.T, si *oriav1alpha1.ScopeInstance, user string, controlled bool, nss ...string) (*rbacv1.ClusterRole, []client.Object) {
	t.Helper()
	gate := binding.GateRole(si, []binding.GateSource{{Name: "pod-reader", Rules: testutil.PodReaderRules()}}, true)
	rbs := binding.RoleBindings(si, si.Spec.ScopeTemplateName, []string{gate.Name}, []rbacv1.Subject{testutil.User(user)}, nss)
	if !controlled {
		gate.OwnerReferences = nil
	}
	testutil.Create(t, k8sClient, gate) // the gate first, then the bindings, as oria does
	var bindings []client.Object
	for _, rb := range rbs {
		if !controlled {
			rb.OwnerReferences = nil
		}
		testutil.Create(t, k8sClient, rb)
		bindings = append(bindings, rb)
	}
	return gate, bindings
}

// eventuallyPodReader waits until the authorizer answers want for user
// reading pods in each of nss (SubjectAccessReviews).
func eventuallyPodReader(t *testing.T, want bool, user string, nss ...string) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		for _, ns := range nss {
			ok, err := testutil.Allowed(context.Background(), k8sClient, testutil.Access{User: user, Verb: "get", Resource: "pods", Namespace: ns})
			require.NoError(ct, err)
			assert.Equal(ct, want, ok, "%s get pods in %s", user, ns)
		}
	}, testutil.Timeout, testutil.Interval)
}

// TestOrphanedGateGoesAfterItsBindings: a gate and its RoleBindings left
// behind by an instance deleted while no oria ran (no garbage collector
// either: their controller references name a UID that no longer exists),
// judged gate first, the worst order. The gate is emptied at once (the
// subject loses access while its bindings still exist) and kept while a
// binding names it; once the bindings are deleted, their deletions bring
// the gate back to the running sweep, which deletes it. The subject is
// denied throughout.
func TestOrphanedGateGoesAfterItsBindings(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	nsA := testutil.CreateNamespace(t, k8sClient, "gate-a", nil)
	nsB := testutil.CreateNamespace(t, k8sClient, "gate-b", nil)
	user := testutil.UniqueName("gate-user")
	si := instance(t, testutil.UniqueName("gated"))
	gate, bindings := gated(t, si, user, true, nsA, nsB)
	eventuallyPodReader(t, true, user, nsA, nsB)

	require.NoError(t, k8sClient.Delete(ctx, si))
	testutil.EventuallyGone(t, k8sClient, si)
	testutil.EventuallyCached(t, mgr.GetClient(), k8sClient, append([]client.Object{gate}, bindings...)...)

	r, writes := sweeper(t, nil)
	_, err := r.Reconcile(ctx, request(orphans.KindClusterRole, gate))
	require.NoError(t, err)
	live := &rbacv1.ClusterRole{}
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKeyFromObject(gate), live), "the gate was deleted while its bindings name it")
	assert.False(t, ownership.GateGrants(live), "the orphaned gate keeps its rules: %v", live.Rules)
	// One write, the emptying, or none when the suite's own sweep, woken
	// by the instance's deletion, emptied the gate first (CI caught that
	// race).
	assert.LessOrEqual(t, writes.Total(), int64(1), "writes: %s", writes)
	for _, b := range bindings {
		require.NoError(t, k8sClient.Get(ctx, client.ObjectKeyFromObject(b), &rbacv1.RoleBinding{}), "binding %s", b.GetName())
	}
	eventuallyPodReader(t, false, user, nsA, nsB)

	for _, b := range bindings {
		_, err := r.Reconcile(ctx, request(orphans.KindRoleBinding, b))
		require.NoError(t, err)
	}
	testutil.EventuallyGone(t, k8sClient, bindings...)
	testutil.EventuallyGone(t, k8sClient, gate) // by the suite's sweep, woken by the bindings' deletions
	eventuallyPodReader(t, false, user, nsA, nsB)
}

// TestOrphanedGateOfDeletedInstance: gates without controller references
// (removed by the garbage collector), labelled for living instances, stay,
// one with its binding, one whose bindings are already gone. When the
// instances are deleted, their deletions bring their gates and bindings to
// the sweep (no event of their own would), which deletes them, and the
// subject is denied.
func TestOrphanedGateOfDeletedInstance(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns := testutil.CreateNamespace(t, k8sClient, "gate-labelled", nil)
	user := testutil.UniqueName("gate-user")
	si, alone := instance(t, testutil.UniqueName("gated")), instance(t, testutil.UniqueName("gated-alone"))
	gate, bindings := gated(t, si, user, false, ns)
	aloneGate, _ := gated(t, alone, user, false)
	eventuallyPodReader(t, true, user, ns)
	all := append([]client.Object{gate, aloneGate}, bindings...)
	testutil.EventuallyCached(t, mgr.GetClient(), k8sClient, all...)
	for _, o := range all {
		require.NoError(t, k8sClient.Get(ctx, client.ObjectKeyFromObject(o), o), "%s of a living instance was deleted", o.GetName())
		assert.Empty(t, o.GetOwnerReferences())
	}
	assert.True(t, ownership.GateGrants(gate), "the gate of a living instance was emptied")

	require.NoError(t, k8sClient.Delete(ctx, si))
	require.NoError(t, k8sClient.Delete(ctx, alone))
	testutil.EventuallyGone(t, k8sClient, all...)
	eventuallyPodReader(t, false, user, ns)
}
