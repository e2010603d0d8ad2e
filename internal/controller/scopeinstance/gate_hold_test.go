package scopeinstance_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/testutil"
)

// gateBindingsOf returns the instance's RoleBindings that name its gate.
func gateBindingsOf(t require.TestingT, si *oriav1alpha1.ScopeInstance) []rbacv1.RoleBinding {
	var rbs rbacv1.RoleBindingList
	require.NoError(t, k8sClient.List(context.Background(), &rbs, client.MatchingLabels{oriav1alpha1.LabelScopeInstance: names.LabelValue(si.Name)}))
	gate := binding.GateName(si.Name, string(si.UID))
	return slices.DeleteFunc(rbs.Items, func(rb rbacv1.RoleBinding) bool { return rb.RoleRef.Name != gate })
}

// TestGateHeldByItsBindings (issue 38, case 5): a gate carries the
// foregroundDeletion finalizer and each of its bindings blocks its
// deletion, so that the garbage collector, deleting an instance's
// dependents while no oria runs, frees the gate's name only after the last
// binding (the e2e test TestGateNameHeldWithoutOria runs the collector).
// A gate and bindings made by an earlier oria, without them, get them. And
// oria never waits for the collector: this suite has none, yet a deleted
// instance's gate goes, after its bindings.
func TestGateHeldByItsBindings(t *testing.T) {
	testutil.NeedCluster(t)
	label, nss, tmpl, _, checks := gatedFixture(t)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, nil, matchLabels(label, "yes"))
	si.Spec.ExpiresAt = wholeSecondsFromNow(time.Hour)
	create(t, si)
	grantsNow(t, true, checks...)
	si = get(t, si.Name, "", &oriav1alpha1.ScopeInstance{})
	held := func(c *assert.CollectT) {
		gate := gateOf(c, si)
		if !assert.NotNil(c, gate) {
			return
		}
		assert.Equal(c, []string{metav1.FinalizerDeleteDependents}, gate.Finalizers)
		rbs := gateBindingsOf(c, si)
		assert.Len(c, rbs, len(nss))
		for _, rb := range rbs {
			assert.Contains(c, rb.OwnerReferences, binding.GateHold(gate.Name, gate.UID), "%s/%s", rb.Namespace, rb.Name)
		}
	}
	require.EventuallyWithT(t, held, testutil.Timeout, testutil.Interval)

	// As an earlier oria left them: no finalizer, no hold.
	gate := gateOf(t, si)
	update(t, gate, func() { gate.Finalizers = nil })
	rb := gateBindingsOf(t, si)[0]
	update(t, &rb, func() { rb.OwnerReferences = rb.OwnerReferences[:1] })
	require.EventuallyWithT(t, held, testutil.Timeout, testutil.Interval)

	// Deleted with no garbage collector: oria deletes the bindings, then
	// the gate, its finalizer removed.
	require.NoError(t, k8sClient.Delete(context.Background(), si))
	grantsNow(t, false, checks...)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Nil(c, gateOf(c, si))
		assert.Empty(c, gateBindingsOf(c, si))
	}, testutil.Timeout, testutil.Interval)
}
