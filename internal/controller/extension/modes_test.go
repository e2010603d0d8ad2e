package extension_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller/extension"
	"github.com/operator-framework/oria/internal/testutil"
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
	testutil.NeedCluster(t)
	e := startManager(t, extension.Options{DefaultMode: unmanaged})
	g := group()
	crds := []string{"foos." + g, "bars." + g}
	ce := installed(t, legacy, crds...)

	roles := waitRoles(t, ce, legacy, crds)
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy, "2 API(s)", "aggregated")
	assertQuiet(t, e, ce.Name)
	first := uids(roles)

	setMode(t, ce.Name, fineGrained)
	roles = waitRoles(t, ce, fineGrained, crds)
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
	assert.Equal(t, first, uids(roles), "Legacy→FineGrained must relabel the same objects, not recreate them")
	assertQuiet(t, e, ce.Name)

	setMode(t, ce.Name, unmanaged)
	waitRoles(t, ce, unmanaged, nil)
	waitCondition(t, ce.Name, metav1.ConditionFalse, oriav1alpha1.ReasonUnmanaged, "not managed by oria", oriav1alpha1.AnnotationRBACMode)
	assertQuiet(t, e, ce.Name)

	setMode(t, ce.Name, legacy)
	roles = waitRoles(t, ce, legacy, crds)
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy)
	second := uids(roles)

	setMode(t, ce.Name, unmanaged)
	waitRoles(t, ce, unmanaged, nil)
	waitCondition(t, ce.Name, metav1.ConditionFalse, oriav1alpha1.ReasonUnmanaged)

	setMode(t, ce.Name, fineGrained)
	roles = waitRoles(t, ce, fineGrained, crds)
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
	third := uids(roles)

	setMode(t, ce.Name, legacy)
	roles = waitRoles(t, ce, legacy, crds)
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy)
	assert.Equal(t, third, uids(roles), "FineGrained→Legacy must relabel in place")
	assert.NotEqual(t, first, second, "Unmanaged must have removed the roles")
	assertQuiet(t, e, ce.Name)

	// What changed is told with Events on the ClusterExtension.
	testutil.EventuallyEvents(t, k8sClient, "ClusterExtension", ce.Name, extension.EventRoleCreated, extension.EventRoleUpdated, extension.EventRoleDeleted, extension.EventModeChanged)
}

// TestUpgradeAddsAndRemovesCRDs: an upgrade that adds an API gets its roles;
// one that drops an API loses exactly that API's roles.
func TestUpgradeAddsAndRemovesCRDs(t *testing.T) {
	testutil.NeedCluster(t)
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
	testutil.NeedCluster(t)
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
	testutil.Create(t, k8sClient, bystander)

	require.NoError(t, k8sClient.Delete(context.Background(), ce))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, n := range roleNames([]string{crd}) {
			assert.True(c, roleGone(n), "%s still exists", n)
		}
	}, testutil.Timeout, testutil.Interval)
	assert.Equal(t, uids(otherRoles), uids(liveRoles(t, other.Name)), "another extension's roles must stay")
	assert.False(t, roleGone(bystander.Name))
}

// TestInvalidMode: an unknown mode is reported and changes nothing.
func TestInvalidMode(t *testing.T) {
	testutil.NeedCluster(t)
	e := startManager(t, extension.Options{DefaultMode: unmanaged})
	crd := "foos." + group()
	ce := installed(t, legacy, crd)
	before := waitRoles(t, ce, legacy, []string{crd})
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy, "1 API(s)")

	setMode(t, ce.Name, "legacy") // modes are case-sensitive
	waitCondition(t, ce.Name, metav1.ConditionFalse, oriav1alpha1.ReasonInvalidMode, `"legacy"`, "Legacy, FineGrained, Unmanaged")
	testutil.EventuallyEvents(t, k8sClient, "ClusterExtension", ce.Name, extension.EventInvalidMode)
	assertQuiet(t, e, ce.Name)
	after := liveRoles(t, ce.Name)
	require.Len(t, after, len(before))
	for n, r := range before {
		assert.Equal(t, r.ResourceVersion, after[n].ResourceVersion, "%s changed under an invalid mode", n)
	}

	setMode(t, ce.Name, fineGrained)
	waitRoles(t, ce, fineGrained, []string{crd})
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
}

// TestDefaultMode: an extension without the annotation is in the
// controller's default mode; changing the default (restarting oria with
// another flag) converges.
func TestDefaultMode(t *testing.T) {
	testutil.NeedCluster(t)
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
	setMode(t, ce.Name, fineGrained)
	waitRoles(t, ce, fineGrained, []string{crd})
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
}

// TestLongNames: a CRD whose role names exceed 253 characters gets
// shortened role names that work end to end (created, found again, quiet,
// removed).
func TestLongNames(t *testing.T) {
	testutil.NeedCluster(t)
	e := startManager(t, extension.Options{DefaultMode: unmanaged})
	crd := "foos." + strings.Repeat("g", 63) + "." + strings.Repeat("h", 63) + "." + strings.Repeat("i", 63) + "." + strings.Repeat("j", 30) + "." + group()
	require.LessOrEqual(t, len(crd), 253)
	require.Greater(t, len(crd+"-admin"), 253)
	ce := installed(t, legacy, crd)
	waitRoles(t, ce, legacy, []string{crd})
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy, "1 API(s)")
	assertQuiet(t, e, ce.Name)
	setMode(t, ce.Name, unmanaged)
	waitRoles(t, ce, unmanaged, nil)
}
