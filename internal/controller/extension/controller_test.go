package extension_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller/extension"
	"github.com/operator-framework/oria/internal/names"
)

var (
	legacy      = oriav1alpha1.RBACModeLegacy
	fineGrained = oriav1alpha1.RBACModeFineGrained
	unmanaged   = oriav1alpha1.RBACModeUnmanaged
)

// TestModes takes an installed extension through every mode and every mode
// switch: Legacy→FineGrained→Unmanaged→Legacy→Unmanaged→FineGrained→Legacy.
// Switches between Legacy and FineGrained change labels in place (same
// objects); Unmanaged removes the roles.
func TestModes(t *testing.T) {
	e := startManager(t, extension.Options{DefaultMode: unmanaged})
	g := group()
	crds := []string{"foos." + g, "bars." + g}
	ce := installed(t, legacy, crds...)

	roles := waitRoles(t, ce, legacy, crds)
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy, "2 API(s)", "aggregated")
	assertQuiet(t, e, ce.Name)
	first := uids(roles)

	setMode(t, ce.Name, string(fineGrained))
	roles = waitRoles(t, ce, fineGrained, crds)
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
	assert.Equal(t, first, uids(roles), "Legacy→FineGrained must relabel the same objects, not recreate them")
	assertQuiet(t, e, ce.Name)

	setMode(t, ce.Name, string(unmanaged))
	waitRoles(t, ce, unmanaged, nil)
	waitCondition(t, ce.Name, metav1.ConditionFalse, oriav1alpha1.ReasonUnmanaged, "not managed by oria", oriav1alpha1.AnnotationRBACMode)
	assertQuiet(t, e, ce.Name)

	setMode(t, ce.Name, string(legacy))
	roles = waitRoles(t, ce, legacy, crds)
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy)
	second := uids(roles)

	setMode(t, ce.Name, string(unmanaged))
	waitRoles(t, ce, unmanaged, nil)
	waitCondition(t, ce.Name, metav1.ConditionFalse, oriav1alpha1.ReasonUnmanaged)

	setMode(t, ce.Name, string(fineGrained))
	roles = waitRoles(t, ce, fineGrained, crds)
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
	third := uids(roles)

	setMode(t, ce.Name, string(legacy))
	roles = waitRoles(t, ce, legacy, crds)
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy)
	assert.Equal(t, third, uids(roles), "FineGrained→Legacy must relabel in place")
	assert.NotEqual(t, first, second, "Unmanaged must have removed the roles")
	assertQuiet(t, e, ce.Name)

	// What changed is told with Events on the ClusterExtension.
	waitEvents(t, ce, extension.EventRoleCreated, extension.EventRoleUpdated, extension.EventRoleDeleted, extension.EventModeChanged)
}

// TestUpgradeAddsAndRemovesCRDs: an upgrade that adds an API gets its roles;
// one that drops an API loses exactly that API's roles.
func TestUpgradeAddsAndRemovesCRDs(t *testing.T) {
	e := startManager(t, extension.Options{DefaultMode: unmanaged})
	g := group()
	foos, bars := "foos."+g, "bars."+g
	ce := installed(t, fineGrained, foos)
	waitRoles(t, ce, fineGrained, []string{foos})
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained, "1 API(s)")

	addCRD(t, ce.Name, bars)
	roles := waitRoles(t, ce, fineGrained, []string{foos, bars})
	barUIDs := map[string]types.UID{}
	for _, n := range roleNames([]string{bars}) {
		barUIDs[n] = roles[n].UID
	}

	deleteCRD(t, foos)
	roles = waitRoles(t, ce, fineGrained, []string{bars})
	for n, uid := range barUIDs {
		assert.Equal(t, uid, roles[n].UID, "%s must not be touched when another API goes", n)
	}
	for _, n := range roleNames([]string{foos}) {
		assert.True(t, roleGone(n), "%s must be deleted", n)
	}
	assertQuiet(t, e, ce.Name)

	// The last API goes: nothing left, still True (nothing to do).
	deleteCRD(t, bars)
	waitRoles(t, ce, fineGrained, nil)
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained, "no APIs")
}

// TestExtensionDeleted: deleting the extension removes its roles (no garbage
// collector runs in this suite, so this is oria's doing) and nothing else.
func TestExtensionDeleted(t *testing.T) {
	startManager(t, extension.Options{DefaultMode: unmanaged})
	g := group()
	crd := "foos." + g
	ce := installed(t, legacy, crd)
	other := installed(t, legacy, "bars."+g)
	waitRoles(t, ce, legacy, []string{crd})
	otherRoles := waitRoles(t, other, legacy, []string{"bars." + g})

	// A role someone else made that looks like an oria role name for this
	// extension but is not labelled oria's.
	bystander := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "bystander-" + g,
		Labels: map[string]string{oriav1alpha1.LabelExtension: ce.Name}}}
	require.NoError(t, k8sClient.Create(context.Background(), bystander))
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), bystander) })

	require.NoError(t, k8sClient.Delete(context.Background(), ce))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, n := range roleNames([]string{crd}) {
			assert.True(c, roleGone(n), "%s still exists", n)
		}
	}, timeout, interval)
	assert.Equal(t, uids(otherRoles), uids(liveRoles(t, other.Name)), "another extension's roles must stay")
	assert.False(t, roleGone(bystander.Name))
}

// TestDrift: generated roles that are deleted or edited are restored.
func TestDrift(t *testing.T) {
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
		}, timeout, interval)
		waitRoles(t, ce, legacy, []string{crd})
	})

	t.Run("edited rules are restored", func(t *testing.T) {
		edit := getRole(t, names.ExtensionRole(crd, names.RoleEdit))
		edit.Rules[0].Verbs = append(edit.Rules[0].Verbs, "deletecollection")
		edit.Rules = append(edit.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
		require.NoError(t, k8sClient.Update(ctx, edit))
		waitRoles(t, ce, legacy, []string{crd})
	})

	t.Run("removed aggregation label is restored", func(t *testing.T) {
		admin := getRole(t, names.ExtensionRole(crd, names.RoleAdmin))
		delete(admin.Labels, oriav1alpha1.LabelAggregateToAdmin)
		require.NoError(t, k8sClient.Update(ctx, admin))
		waitRoles(t, ce, legacy, []string{crd})
	})

	t.Run("role stripped of oria's managed-by label is re-adopted", func(t *testing.T) {
		// The role drops out of oria's cache; its owner reference still
		// says it is oria's.
		crdview := getRole(t, names.ExtensionRole(crd, names.RoleViewCRDView))
		delete(crdview.Labels, oriav1alpha1.LabelManagedBy)
		require.NoError(t, k8sClient.Update(ctx, crdview))
		waitRoles(t, ce, legacy, []string{crd})
		assert.Equal(t, crdview.UID, getRole(t, crdview.Name).UID)
		waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy)
	})

	t.Run("aggregation label added by someone else to a FineGrained role is removed", func(t *testing.T) {
		setMode(t, ce.Name, string(fineGrained))
		waitRoles(t, ce, fineGrained, []string{crd})
		view := getRole(t, names.ExtensionRole(crd, names.RoleView))
		view.Labels[oriav1alpha1.LabelAggregateToView] = "true"
		require.NoError(t, k8sClient.Update(ctx, view, client.FieldOwner("kubectl-label")))
		waitRoles(t, ce, fineGrained, []string{crd})
	})
	assertQuiet(t, e, ce.Name)
}

// TestConflict: a same-name role oria did not create is never touched; it is
// named in a Conflict condition and the other roles are still generated.
// When it goes away, oria generates its own.
func TestConflict(t *testing.T) {
	e := startManager(t, extension.Options{DefaultMode: unmanaged, ConflictRetryInterval: 200 * time.Millisecond})
	ctx := context.Background()
	crd := "foos." + group()

	foreignName := names.ExtensionRole(crd, names.RoleView)
	foreign := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: foreignName, Labels: map[string]string{"team": "platform"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}},
	}
	require.NoError(t, k8sClient.Create(ctx, foreign))
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, foreign) })

	// A role oria generated for another extension (same name: the other
	// extension provided this CRD before). The other extension's mode is
	// invalid, so oria leaves its roles as they are (otherwise it would
	// delete this one at once, as the other extension no longer has the
	// CRD).
	otherExt := newExtension(t, "Bogus")
	otherName := names.ExtensionRole(crd, names.RoleEdit)
	other := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: otherName, Labels: map[string]string{
			oriav1alpha1.LabelManagedBy: oriav1alpha1.ManagedByValue, oriav1alpha1.LabelExtension: otherExt.Name,
		}, Annotations: map[string]string{oriav1alpha1.AnnotationCRD: crd},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: ocv1.GroupVersion.String(), Kind: "ClusterExtension",
				Name: otherExt.Name, UID: otherExt.UID, Controller: new(true)}}},
	}
	require.NoError(t, k8sClient.Create(ctx, other))
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, other) })
	foreign, other = getRole(t, foreignName), getRole(t, otherName)

	ce := installed(t, legacy, crd)
	waitRoles(t, ce, legacy, []string{crd}, foreignName, otherName)
	waitCondition(t, ce.Name, metav1.ConditionFalse, oriav1alpha1.ReasonConflict,
		`ClusterRole "`+foreignName+`" exists and was not created by oria`, `ClusterRole "`+otherName+`"`, otherExt.Name)
	assert.Equal(t, foreign.ResourceVersion, getRole(t, foreignName).ResourceVersion, "conflicting role modified")
	assert.Equal(t, other.ResourceVersion, getRole(t, otherName).ResourceVersion, "other extension's role modified")
	waitEvents(t, ce, extension.EventConflict)
	assertQuiet(t, e, ce.Name)

	// The admin resolves the conflicts: oria generates its own roles.
	require.NoError(t, k8sClient.Delete(ctx, foreign))
	require.NoError(t, k8sClient.Delete(ctx, other))
	waitRoles(t, ce, legacy, []string{crd})
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy)
}

// bundleRole creates a ClusterRole as operator-controller would install it
// from a bundle for the extension.
func bundleRole(t *testing.T, ext, name string, labels map[string]string) *rbacv1.ClusterRole {
	t.Helper()
	l := map[string]string{
		oriav1alpha1.LabelOLMOwnerKind: oriav1alpha1.OLMOwnerKindClusterExtension,
		oriav1alpha1.LabelOLMOwnerName: ext,
		"app.kubernetes.io/part-of":    "bundle",
	}
	for k, v := range labels {
		l[k] = v
	}
	cr := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l, Annotations: map[string]string{"bundle": "yes"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"bundle.example.com"}, Resources: []string{"things"}, Verbs: []string{"get", "list"}}},
	}
	require.NoError(t, k8sClient.Create(context.Background(), cr, client.FieldOwner("operator-controller")))
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), cr) })
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
	e := startManager(t, extension.Options{DefaultMode: unmanaged})
	crd := "foos." + group()
	ce := newExtension(t, fineGrained)
	adminName, viewName := names.ExtensionRole(crd, names.RoleAdmin), names.ExtensionRole(crd, names.RoleView)
	bundleRole(t, ce.Name, adminName, nil)
	// This one aggregates to view on its own account: oria must not remove
	// the bundle's label when leaving Legacy.
	bundleRole(t, ce.Name, viewName, map[string]string{oriav1alpha1.LabelAggregateToView: "true"})
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
	setMode(t, ce.Name, string(legacy))
	waitRoles(t, ce, legacy, []string{crd}, adminName, viewName)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		admin, view := getRole(c, adminName), getRole(c, viewName)
		assert.Equal(c, "true", admin.Labels[oriav1alpha1.LabelAggregateToAdmin])
		assert.Equal(c, "true", view.Labels[oriav1alpha1.LabelAggregateToView])
		assert.Equal(c, []string{`Apply {"f:metadata":{"f:labels":{"f:` + oriav1alpha1.LabelAggregateToAdmin + `":{}}}}`}, oriaFields(admin))
		assert.Equal(c, []string{`Apply {"f:metadata":{"f:labels":{"f:` + oriav1alpha1.LabelAggregateToView + `":{}}}}`}, oriaFields(view))
	}, timeout, interval)
	assert.Equal(t, snap(adminBefore), snap(getRole(t, adminName)))
	assert.Equal(t, snap(viewBefore), snap(getRole(t, viewName)))
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy)
	assertQuiet(t, e, ce.Name)

	// Back to FineGrained: oria's label goes, the bundle's stays.
	setMode(t, ce.Name, string(fineGrained))
	waitRoles(t, ce, fineGrained, []string{crd}, adminName, viewName)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		admin, view := getRole(c, adminName), getRole(c, viewName)
		assert.NotContains(c, admin.Labels, oriav1alpha1.LabelAggregateToAdmin)
		assert.Equal(c, "true", view.Labels[oriav1alpha1.LabelAggregateToView], "the bundle's own label must stay")
		for _, f := range append(oriaFields(admin), oriaFields(view)...) {
			assert.NotContains(c, f, "f:labels", "oria still owns a label")
		}
	}, timeout, interval)
	assert.Equal(t, snap(adminBefore), snap(getRole(t, adminName)))
	assert.Equal(t, snap(viewBefore), snap(getRole(t, viewName)))
	assertQuiet(t, e, ce.Name)

	// Unmanaged: generated roles go, bundle roles stay as the bundle made them.
	setMode(t, ce.Name, string(legacy))
	waitRoles(t, ce, legacy, []string{crd}, adminName, viewName)
	require.Eventually(t, func() bool { return getRole(t, adminName).Labels[oriav1alpha1.LabelAggregateToAdmin] == "true" }, timeout, interval)
	setMode(t, ce.Name, string(unmanaged))
	waitRoles(t, ce, unmanaged, nil)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		admin := getRole(c, adminName)
		assert.NotContains(c, admin.Labels, oriav1alpha1.LabelAggregateToAdmin)
	}, timeout, interval)
	assert.Equal(t, snap(adminBefore), snap(getRole(t, adminName)))
	assert.Equal(t, snap(viewBefore), snap(getRole(t, viewName)))
	waitCondition(t, ce.Name, metav1.ConditionFalse, oriav1alpha1.ReasonUnmanaged)
	assertQuiet(t, e, ce.Name)

	// A bundle role of another extension under the name is a conflict.
	other := newExtension(t, legacy)
	crd2 := "bars." + group()
	bundleRole(t, other.Name, names.ExtensionRole(crd2, names.RoleEdit), nil)
	addCRD(t, ce.Name, crd2)
	setMode(t, ce.Name, string(legacy))
	waitCondition(t, ce.Name, metav1.ConditionFalse, oriav1alpha1.ReasonConflict, names.ExtensionRole(crd2, names.RoleEdit))
}

// TestInvalidMode: an unknown mode is reported and changes nothing.
func TestInvalidMode(t *testing.T) {
	e := startManager(t, extension.Options{DefaultMode: unmanaged})
	crd := "foos." + group()
	ce := installed(t, legacy, crd)
	before := waitRoles(t, ce, legacy, []string{crd})
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy, "1 API(s)")

	setMode(t, ce.Name, "legacy") // modes are case-sensitive
	waitCondition(t, ce.Name, metav1.ConditionFalse, oriav1alpha1.ReasonInvalidMode, `"legacy"`, "Legacy, FineGrained, Unmanaged")
	waitEvents(t, ce, extension.EventInvalidMode)
	assertQuiet(t, e, ce.Name)
	after := liveRoles(t, ce.Name)
	require.Len(t, after, len(before))
	for n, r := range before {
		assert.Equal(t, r.ResourceVersion, after[n].ResourceVersion, "%s changed under an invalid mode", n)
	}

	setMode(t, ce.Name, string(fineGrained))
	waitRoles(t, ce, fineGrained, []string{crd})
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
}

// TestDefaultMode: an extension without the annotation is in the
// controller's default mode; changing the default (restarting oria with
// another flag) converges.
func TestDefaultMode(t *testing.T) {
	crd := "foos." + group()
	e := startManager(t, extension.Options{DefaultMode: legacy})
	ce := installed(t, "", crd)
	waitRoles(t, ce, legacy, []string{crd})
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy, "1 API(s)")
	assertQuiet(t, e, ce.Name)
	e.stop()

	e = startManager(t, extension.Options{DefaultMode: unmanaged})
	waitRoles(t, ce, unmanaged, nil)
	waitCondition(t, ce.Name, metav1.ConditionFalse, oriav1alpha1.ReasonUnmanaged, "default")
	assertQuiet(t, e, ce.Name)

	// The annotation wins over the default.
	setMode(t, ce.Name, string(fineGrained))
	waitRoles(t, ce, fineGrained, []string{crd})
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
}

// TestLongNames: a CRD whose role names exceed 253 characters gets
// shortened role names that work end to end (created, found again, quiet,
// removed).
func TestLongNames(t *testing.T) {
	e := startManager(t, extension.Options{DefaultMode: unmanaged})
	crd := "foos." + strings.Repeat("g", 63) + "." + strings.Repeat("h", 63) + "." + strings.Repeat("i", 63) + "." + strings.Repeat("j", 30) + "." + group()
	require.LessOrEqual(t, len(crd), 253)
	require.Greater(t, len(crd+"-admin"), 253)
	ce := installed(t, legacy, crd)
	waitRoles(t, ce, legacy, []string{crd})
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy, "1 API(s)")
	assertQuiet(t, e, ce.Name)
	setMode(t, ce.Name, string(unmanaged))
	waitRoles(t, ce, unmanaged, nil)
}

// opconSetCondition updates one of operator-controller's own conditions the
// way operator-controller does: GET, meta.SetStatusCondition, Status().Update
// (with its field manager), retrying on a resourceVersion conflict.
func opconSetCondition(t *testing.T, name string, cond metav1.Condition) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ce := getCE(c, name)
		cond.ObservedGeneration = ce.Generation
		meta.SetStatusCondition(&ce.Status.Conditions, cond)
		require.NoError(c, k8sClient.Status().Update(context.Background(), ce, client.FieldOwner("operator-controller")))
	}, timeout, interval)
}

func conditionTypes(t require.TestingT, name string) map[string]string {
	out := map[string]string{}
	for _, c := range getCE(t, name).Status.Conditions {
		out[c.Type] = c.Reason
	}
	return out
}

// TestConditionCoexistence: operator-controller-style status updates and
// oria's condition writes do not erase each other, in either order.
func TestConditionCoexistence(t *testing.T) {
	crd := "foos." + group()
	ce := installed(t, legacy, crd)

	// operator-controller first (oria not running yet).
	opconSetCondition(t, ce.Name, metav1.Condition{Type: ocv1.TypeInstalled, Status: metav1.ConditionTrue, Reason: ocv1.ReasonSucceeded, Message: "installed"})
	opconSetCondition(t, ce.Name, metav1.Condition{Type: ocv1.TypeProgressing, Status: metav1.ConditionTrue, Reason: ocv1.ReasonSucceeded, Message: "done"})

	// Then oria.
	startManager(t, extension.Options{DefaultMode: unmanaged})
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy, "1 API(s)")
	assert.Equal(t, map[string]string{ocv1.TypeInstalled: ocv1.ReasonSucceeded, ocv1.TypeProgressing: ocv1.ReasonSucceeded,
		oriav1alpha1.TypeRBACManaged: oriav1alpha1.ReasonLegacy}, conditionTypes(t, ce.Name))

	// operator-controller again, changing its conditions.
	opconSetCondition(t, ce.Name, metav1.Condition{Type: ocv1.TypeProgressing, Status: metav1.ConditionTrue, Reason: ocv1.ReasonRetrying, Message: "retrying"})
	opconSetCondition(t, ce.Name, metav1.Condition{Type: ocv1.TypeInstalled, Status: metav1.ConditionFalse, Reason: ocv1.ReasonFailed, Message: "failed"})
	assert.Equal(t, map[string]string{ocv1.TypeInstalled: ocv1.ReasonFailed, ocv1.TypeProgressing: ocv1.ReasonRetrying,
		oriav1alpha1.TypeRBACManaged: oriav1alpha1.ReasonLegacy}, conditionTypes(t, ce.Name))

	// oria changes its condition: operator-controller's stay.
	setMode(t, ce.Name, string(fineGrained))
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
	assert.Equal(t, map[string]string{ocv1.TypeInstalled: ocv1.ReasonFailed, ocv1.TypeProgressing: ocv1.ReasonRetrying,
		oriav1alpha1.TypeRBACManaged: oriav1alpha1.ReasonFineGrained}, conditionTypes(t, ce.Name))

	// operator-controller once more, after oria's change.
	opconSetCondition(t, ce.Name, metav1.Condition{Type: ocv1.TypeInstalled, Status: metav1.ConditionTrue, Reason: ocv1.ReasonSucceeded, Message: "installed"})
	setMode(t, ce.Name, string(unmanaged))
	waitCondition(t, ce.Name, metav1.ConditionFalse, oriav1alpha1.ReasonUnmanaged)
	assert.Equal(t, map[string]string{ocv1.TypeInstalled: ocv1.ReasonSucceeded, ocv1.TypeProgressing: ocv1.ReasonRetrying,
		oriav1alpha1.TypeRBACManaged: oriav1alpha1.ReasonUnmanaged}, conditionTypes(t, ce.Name))

	// oria's field manager owns its condition and nothing else of the status.
	for _, f := range getCE(t, ce.Name).ManagedFields {
		if f.Manager != oriav1alpha1.FieldOwner {
			continue
		}
		var fields map[string]any
		require.NoError(t, json.Unmarshal(f.FieldsV1.Raw, &fields))
		conds := fields["f:status"].(map[string]any)["f:conditions"].(map[string]any)
		var keys []string
		for k := range conds {
			if k != "." {
				keys = append(keys, k)
			}
		}
		assert.Equal(t, []string{`k:{"type":"RBACManaged"}`}, keys)
		assert.Equal(t, "status", f.Subresource)
	}
}

// waitEvents waits until Events with each reason exist for the extension.
func waitEvents(t *testing.T, ce *ocv1.ClusterExtension, reasons ...string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		list := &eventsv1.EventList{}
		require.NoError(c, k8sClient.List(context.Background(), list))
		var got []string
		for _, ev := range list.Items {
			if ev.Regarding.Name == ce.Name && ev.Regarding.Kind == "ClusterExtension" {
				got = append(got, ev.Reason)
			}
		}
		for _, r := range reasons {
			assert.True(c, slices.Contains(got, r), "no %s event; got %v", r, got)
		}
	}, timeout, interval)
}

// staleReader answers NotFound for every ClusterRole, like a read that
// happened just before someone created the role.
type staleReader struct{ client.Reader }

func (r staleReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*rbacv1.ClusterRole); ok {
		return apierrors.NewNotFound(rbacv1.Resource("clusterroles"), key.Name)
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// TestCreateNeverTakesOver: a role that appears between oria's read and its
// write (a bundle role being installed, say) makes the write fail; it is not
// taken over, and the next reconcile classifies it correctly.
func TestCreateNeverTakesOver(t *testing.T) {
	e := startManager(t, extension.Options{DefaultMode: unmanaged})
	crd := "foos." + group()
	ce := newExtension(t, "Bogus") // the running controller leaves it alone
	addCRD(t, ce.Name, crd)
	foreignName := names.ExtensionRole(crd, names.RoleView)
	foreign := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: foreignName, Labels: map[string]string{"team": "platform"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}},
	}
	require.NoError(t, k8sClient.Create(context.Background(), foreign))
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), foreign) })
	waitCondition(t, ce.Name, metav1.ConditionFalse, oriav1alpha1.ReasonInvalidMode)

	ceNow := getCE(t, ce.Name)
	ceNow.Annotations[oriav1alpha1.AnnotationRBACMode] = string(legacy)
	r := &extension.Reconciler{
		// A client whose cache shows the extension in Legacy mode: only
		// this Reconciler acts on it.
		Client:      modeOverride{Client: e.mgr.GetClient(), ce: ceNow},
		APIReader:   staleReader{e.mgr.GetAPIReader()},
		Recorder:    events.NewFakeRecorder(100),
		DefaultMode: unmanaged,
	}
	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: ce.Name}})
	require.Error(t, err)
	assert.True(t, apierrors.IsAlreadyExists(err), "want AlreadyExists, got %v", err)
	got := getRole(t, foreignName)
	assert.Equal(t, foreign.ResourceVersion, got.ResourceVersion, "foreign role modified")
	assert.Equal(t, map[string]string{"team": "platform"}, got.Labels)
}

// modeOverride returns ce for Gets of that ClusterExtension and does not
// write status (so the running controller's view stays as it is).
type modeOverride struct {
	client.Client
	ce *ocv1.ClusterExtension
}

func (m modeOverride) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if ce, ok := obj.(*ocv1.ClusterExtension); ok && key.Name == m.ce.Name {
		m.ce.DeepCopyInto(ce)
		return nil
	}
	return m.Client.Get(ctx, key, obj, opts...)
}

func (m modeOverride) Status() client.SubResourceWriter { return noStatus{} }

type noStatus struct{ client.SubResourceWriter }

func (noStatus) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return nil
}
