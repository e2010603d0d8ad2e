package extension_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller/extension"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestDrift: generated roles that are deleted or edited are restored.
func TestDrift(t *testing.T) {
	testutil.NeedCluster(t)
	e := startManager(t, extension.Options{DefaultMode: unmanaged})
	crd := "foos." + group()
	ce := installed(t, legacy, crd)
	roles := waitRoles(t, ce, legacy, []string{crd})
	ctx := context.Background()

	t.Run("deleted role is recreated", func(t *testing.T) {
		view := roles[names.ExtensionRole(crd, names.RoleView)]
		require.NoError(t, k8sClient.Delete(ctx, view))
		require.Eventually(t, func() bool {
			cr := &rbacv1.ClusterRole{}
			return k8sClient.Get(ctx, client.ObjectKeyFromObject(view), cr) == nil && cr.UID != view.UID
		}, testutil.Timeout, testutil.Interval)
		waitRoles(t, ce, legacy, []string{crd})
	})

	t.Run("edited rules are restored", func(t *testing.T) {
		edit := role(names.ExtensionRole(crd, names.RoleEdit))
		testutil.Update(t, k8sClient, edit, func() {
			edit.Rules[0].Verbs = append(edit.Rules[0].Verbs, "deletecollection")
			edit.Rules = append(edit.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
		})
		waitRoles(t, ce, legacy, []string{crd})
	})

	t.Run("added aggregationRule is removed", func(t *testing.T) {
		// Kept, the aggregation controller would replace the rules with
		// those of every role it selects.
		edit := role(names.ExtensionRole(crd, names.RoleEdit))
		testutil.Update(t, k8sClient, edit, func() {
			edit.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
				{MatchLabels: map[string]string{oriav1alpha1.LabelAggregateToAdmin: "true"}},
			}}
		}, client.FieldOwner("someone"))
		waitRoles(t, ce, legacy, []string{crd})
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Nil(c, getRole(c, edit.Name).AggregationRule)
		}, testutil.Timeout, testutil.Interval)
	})

	t.Run("removed aggregation label is restored", func(t *testing.T) {
		admin := role(names.ExtensionRole(crd, names.RoleAdmin))
		testutil.Update(t, k8sClient, admin, func() { delete(admin.Labels, oriav1alpha1.LabelAggregateToAdmin) })
		waitRoles(t, ce, legacy, []string{crd})
	})

	t.Run("role stripped of oria's managed label is re-adopted", func(t *testing.T) {
		// The role drops out of oria's cache; its owner reference still
		// says it is oria's.
		crdview := role(names.ExtensionRole(crd, names.RoleViewCRDView))
		testutil.Update(t, k8sClient, crdview, func() { delete(crdview.Labels, oriav1alpha1.LabelManaged) })
		waitRoles(t, ce, legacy, []string{crd})
		assert.Equal(t, crdview.UID, getRole(t, crdview.Name).UID)
		waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy)
	})

	t.Run("aggregation label added by someone else to a FineGrained role is removed", func(t *testing.T) {
		setMode(t, ce.Name, fineGrained)
		waitRoles(t, ce, fineGrained, []string{crd})
		view := role(names.ExtensionRole(crd, names.RoleView))
		testutil.Update(t, k8sClient, view, func() { view.Labels[oriav1alpha1.LabelAggregateToView] = "true" }, client.FieldOwner("kubectl-label"))
		waitRoles(t, ce, fineGrained, []string{crd})
	})
	assertQuiet(t, e, ce.Name)
}
