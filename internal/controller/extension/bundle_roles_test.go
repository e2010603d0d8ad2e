package extension_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller/extension"
	"github.com/operator-framework/oria/internal/genroles"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/testutil"
)

// bundleRole creates the ClusterRole of kind for crd as operator-controller
// would install it from a bundle for the extension, with rules (by default
// the rules oria would generate, which stay within the extension).
func bundleRole(t *testing.T, ext, crd string, kind names.RoleKind, labels map[string]string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	t.Helper()
	l := map[string]string{
		oriav1alpha1.LabelOLMOwnerKind: oriav1alpha1.OLMOwnerKindClusterExtension,
		oriav1alpha1.LabelOLMOwnerName: ext,
		"app.kubernetes.io/part-of":    "bundle",
	}
	for k, v := range labels {
		l[k] = v
	}
	if len(rules) == 0 {
		rules = genroles.Rules(crd, kind)
	}
	cr := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: names.ExtensionRole(crd, kind), Labels: l, Annotations: map[string]string{"bundle": "yes"}},
		Rules:      rules,
	}
	testutil.Create(t, k8sClient, cr, client.FieldOwner("operator-controller"))
	return cr
}

// oriaFields returns the managedFields entries of oria on obj.
func oriaFields(obj metav1.Object) []string {
	var out []string
	for _, e := range obj.GetManagedFields() {
		if e.Manager == oriav1alpha1.FieldOwner {
			out = append(out, string(e.Operation)+" "+string(e.FieldsV1.Raw))
		}
	}
	return out
}

// TestBundleProvidedRoles: roles the bundle provides under the generated
// names are used instead of generated ones; in Legacy mode oria adds only the
// aggregation label with its own field owner, and removes exactly that label
// when leaving Legacy. Nothing else on them is ever changed.
func TestBundleProvidedRoles(t *testing.T) {
	testutil.NeedCluster(t)
	e := startManager(t, extension.Options{DefaultMode: unmanaged})
	crd := "foos." + group()
	ce := newExtension(t, fineGrained)
	adminName, viewName := names.ExtensionRole(crd, names.RoleAdmin), names.ExtensionRole(crd, names.RoleView)
	bundleRole(t, ce.Name, crd, names.RoleAdmin, nil)
	// This one aggregates to view on its own account: oria must not remove
	// the bundle's label when leaving Legacy.
	bundleRole(t, ce.Name, crd, names.RoleView, map[string]string{oriav1alpha1.LabelAggregateToView: "true"})
	addCRD(t, ce.Name, crd)

	type snapshot struct {
		Labels      map[string]string
		Annotations map[string]string
		Rules       []rbacv1.PolicyRule
		Owners      []metav1.OwnerReference
	}
	snap := func(cr *rbacv1.ClusterRole) snapshot {
		l := map[string]string{}
		for k, v := range cr.Labels {
			if !strings.HasPrefix(k, "rbac.authorization.k8s.io/aggregate-to-") {
				l[k] = v
			}
		}
		return snapshot{l, cr.Annotations, cr.Rules, cr.OwnerReferences}
	}
	adminBefore, viewBefore := getRole(t, adminName), getRole(t, viewName)

	// FineGrained: used as they are, not touched at all.
	waitRoles(t, ce, fineGrained, []string{crd}, adminName, viewName)
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained, "bundle", adminName, viewName)
	assertQuiet(t, e, ce.Name)
	assert.Equal(t, adminBefore.ResourceVersion, getRole(t, adminName).ResourceVersion)
	assert.Equal(t, viewBefore.ResourceVersion, getRole(t, viewName).ResourceVersion)

	// Legacy: only the aggregation label is added, owned by oria.
	setMode(t, ce.Name, legacy)
	waitRoles(t, ce, legacy, []string{crd}, adminName, viewName)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		admin, view := getRole(c, adminName), getRole(c, viewName)
		assert.Equal(c, "true", admin.Labels[oriav1alpha1.LabelAggregateToAdmin])
		assert.Equal(c, "true", view.Labels[oriav1alpha1.LabelAggregateToView])
		assert.Equal(c, []string{`Apply {"f:metadata":{"f:labels":{"f:` + oriav1alpha1.LabelAggregateToAdmin + `":{}}}}`}, oriaFields(admin))
		assert.Equal(c, []string{`Apply {"f:metadata":{"f:labels":{"f:` + oriav1alpha1.LabelAggregateToView + `":{}}}}`}, oriaFields(view))
	}, testutil.Timeout, testutil.Interval)
	assert.Equal(t, snap(adminBefore), snap(getRole(t, adminName)))
	assert.Equal(t, snap(viewBefore), snap(getRole(t, viewName)))
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy)
	assertQuiet(t, e, ce.Name)

	// Back to FineGrained: oria's label goes, the bundle's stays.
	setMode(t, ce.Name, fineGrained)
	waitRoles(t, ce, fineGrained, []string{crd}, adminName, viewName)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		admin, view := getRole(c, adminName), getRole(c, viewName)
		assert.NotContains(c, admin.Labels, oriav1alpha1.LabelAggregateToAdmin)
		assert.Equal(c, "true", view.Labels[oriav1alpha1.LabelAggregateToView], "the bundle's own label must stay")
		for _, f := range append(oriaFields(admin), oriaFields(view)...) {
			assert.NotContains(c, f, "f:labels", "oria still owns a label")
		}
	}, testutil.Timeout, testutil.Interval)
	assert.Equal(t, snap(adminBefore), snap(getRole(t, adminName)))
	assert.Equal(t, snap(viewBefore), snap(getRole(t, viewName)))
	assertQuiet(t, e, ce.Name)

	// Unmanaged: generated roles go, bundle roles stay as the bundle made them.
	setMode(t, ce.Name, legacy)
	waitRoles(t, ce, legacy, []string{crd}, adminName, viewName)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, "true", getRole(c, adminName).Labels[oriav1alpha1.LabelAggregateToAdmin])
	}, testutil.Timeout, testutil.Interval)
	setMode(t, ce.Name, unmanaged)
	waitRoles(t, ce, unmanaged, nil)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		admin := getRole(c, adminName)
		assert.NotContains(c, admin.Labels, oriav1alpha1.LabelAggregateToAdmin)
	}, testutil.Timeout, testutil.Interval)
	assert.Equal(t, snap(adminBefore), snap(getRole(t, adminName)))
	assert.Equal(t, snap(viewBefore), snap(getRole(t, viewName)))
	waitCondition(t, ce.Name, metav1.ConditionFalse, oriav1alpha1.ReasonUnmanaged)
	assertQuiet(t, e, ce.Name)

	// A bundle role of another extension under the name is a conflict.
	other := newExtension(t, legacy)
	crd2 := "bars." + group()
	bundleRole(t, other.Name, crd2, names.RoleEdit, nil)
	addCRD(t, ce.Name, crd2)
	setMode(t, ce.Name, legacy)
	waitCondition(t, ce.Name, metav1.ConditionFalse, oriav1alpha1.ReasonConflict, names.ExtensionRole(crd2, names.RoleEdit))
}
