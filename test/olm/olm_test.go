package olm

import (
	"context"
	"testing"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestInstallUnmanaged: operator-controller installs the bundle — CRDs and
// the bundle's ClusterRole labelled as its own, with Helm's labels — and
// oria, whose default is Unmanaged, reports it and grants nothing: a
// namespace admin cannot use the extension's APIs.
func TestInstallUnmanaged(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	p := newPackage("unmanaged")
	serveCatalog(t, p, release{version: "1.0.0", apis: apisV1})
	ce := install(t, p, "", "")
	bindBuiltin(t, "admin", "ns-admin", p.name)

	for _, a := range apisV1 {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		require.NoError(t, k8sClient.Get(ctx, client.ObjectKey{Name: p.crdName(a)}, crd))
		assertInstalledBy(t, crd, ce.Name)
	}
	assertInstalledBy(t, bundleRole(t, p), ce.Name)

	cond := waitRBACManaged(t, ce.Name, metav1.ConditionFalse, oriav1alpha1.ReasonUnmanaged)
	t.Logf("RBACManaged: %s", cond.Message)
	assert.Empty(t, generatedRoles(t, ce.Name))
	for k, v := range bundleRole(t, p).Labels {
		assert.NotContains(t, []string{oriav1alpha1.LabelAggregateToAdmin, oriav1alpha1.LabelAggregateToEdit, oriav1alpha1.LabelAggregateToView}, k, "%s=%s", k, v)
	}
	eventuallyAccess(t, false,
		access(p, "ns-admin", "list", widgets, p.name),
		access(p, "ns-admin", "create", gadgets, p.name),
	)
}

// TestLegacy: in Legacy mode oria generates the extension's roles and
// aggregates them to the built-in ones; the bundle's own role under a
// generated name is used instead of generating one, and gets only the
// aggregation label. operator-controller's drift correction restores the
// role's rules after someone edits them, and leaves oria's label alone.
func TestLegacy(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	p := newPackage("legacy")
	serveCatalog(t, p, release{version: "1.0.0", apis: apisV1})
	ns := p.name
	ce := install(t, p, oriav1alpha1.RBACModeLegacy, "")
	bindBuiltin(t, "view", "viewer", ns)
	bindBuiltin(t, "edit", "editor", ns)
	bindBuiltin(t, "view", "cluster-viewer", "")

	waitRBACManaged(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy)
	eventuallyRoles(t, ce.Name, wantRoles(p, apisV1))
	eventuallyAccess(t, true,
		access(p, "viewer", "list", widgets, ns), // through the bundle's role
		access(p, "viewer", "get", gadgets, ns),
		access(p, "editor", "create", widgets, ns),
		access(p, "editor", "delete", gadgets, ns),
		access(p, "cluster-viewer", "list", fleets, ""),
	)
	eventuallyAccess(t, false,
		access(p, "viewer", "create", widgets, ns),
		access(p, "viewer", "list", widgets, "default"),
		access(p, "editor", "create", fleets, ""),
	)

	role := bundleRole(t, p)
	assertInstalledBy(t, role, ce.Name)
	assert.Equal(t, "true", role.Labels[oriav1alpha1.LabelAggregateToView])
	assert.NotContains(t, role.Labels, oriav1alpha1.LabelExtension, "oria adds only the aggregation label to a bundle role")

	// Someone edits the bundle's role: operator-controller puts its rules
	// back; oria's label stays, and so does the access.
	want := role.Rules
	require.NoError(t, k8sClient.Patch(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role.Name}},
		client.RawPatch(types.MergePatchType, []byte(`{"rules":[]}`))))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := bundleRole(c, p)
		assert.Equal(c, want, got.Rules, "operator-controller restores the bundle's rules")
		assert.Equal(c, "true", got.Labels[oriav1alpha1.LabelAggregateToView])
		assertInstalledBy(c, got, ce.Name)
	}, testutil.Timeout, testutil.Interval)
	eventuallyAccess(t, true, access(p, "viewer", "list", widgets, ns))
	waitRBACManaged(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy)
}

// TestFineGrained: roles are generated but not aggregated; an RBACPolicy
// grants exactly its subjects, in its namespaces, through the generated
// roles and the bundle's own.
func TestFineGrained(t *testing.T) {
	testutil.NeedCluster(t)
	p := newPackage("finegrained")
	serveCatalog(t, p, release{version: "1.0.0", apis: apisV1})
	ns := p.name
	ce := install(t, p, oriav1alpha1.RBACModeFineGrained, "")
	bindBuiltin(t, "admin", "ns-admin", ns)

	waitRBACManaged(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
	eventuallyRoles(t, ce.Name, wantRoles(p, apisV1))
	for _, r := range append(wantRoles(p, apisV1), p.bundleRoleName()) {
		role := &rbacv1.ClusterRole{}
		require.NoError(t, k8sClient.Get(context.Background(), client.ObjectKey{Name: r}, role))
		for _, l := range []string{oriav1alpha1.LabelAggregateToAdmin, oriav1alpha1.LabelAggregateToEdit, oriav1alpha1.LabelAggregateToView} {
			assert.NotContains(t, role.Labels, l, "%s is not aggregated in FineGrained mode", r)
		}
	}

	pol := policy(t, p, oriav1alpha1.AccessView, "bob", []string{ns}, widgets, gadgets)
	got := waitPolicy(t, pol.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	assert.ElementsMatch(t, []string{p.crdName(widgets), p.crdName(gadgets)}, got.Status.APIs)
	eventuallyAccess(t, true,
		access(p, "bob", "list", widgets, ns), // the bundle's role
		access(p, "bob", "watch", gadgets, ns),
	)
	eventuallyAccess(t, false,
		access(p, "bob", "create", widgets, ns),
		access(p, "bob", "list", widgets, "default"),
		access(p, "bob", "list", fleets, ""),
		access(p, "ns-admin", "list", widgets, ns), // no aggregation
	)
}

// TestUpgrade: from 1.0.0 to 2.0.0, which adds doohickeys and drops
// gadgets. oria's roles follow the CRDs operator-controller installs and
// removes; a policy naming the dropped API reports it, and a policy for all
// APIs covers the new one.
func TestUpgrade(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	p := newPackage("upgrade")
	serveCatalog(t, p, release{version: "1.0.0", apis: apisV1}, release{version: "2.0.0", apis: apisV2})
	ns := p.name
	ce := install(t, p, oriav1alpha1.RBACModeFineGrained, "1.0.0")
	waitInstalled(t, ce.Name, "1.0.0")
	waitRBACManaged(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
	eventuallyRoles(t, ce.Name, wantRoles(p, apisV1))

	named := policy(t, p, oriav1alpha1.AccessEdit, "alice", []string{ns}, widgets, gadgets)
	all := policy(t, p, oriav1alpha1.AccessView, "carol", nil)
	waitPolicy(t, named.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	got := waitPolicy(t, all.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	assert.ElementsMatch(t, []string{p.crdName(widgets), p.crdName(gadgets), p.crdName(fleets)}, got.Status.APIs)
	eventuallyAccess(t, true,
		access(p, "alice", "create", widgets, ns),
		access(p, "alice", "delete", gadgets, ns),
		access(p, "carol", "list", gadgets, ""),
		access(p, "carol", "list", fleets, ""),
	)

	upgraded := &ocv1.ClusterExtension{}
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKey{Name: ce.Name}, upgraded))
	testutil.Update(t, k8sClient, upgraded, func() { upgraded.Spec.Source.Catalog.Version = "2.0.0" })
	waitInstalled(t, ce.Name, "2.0.0")

	// operator-controller removed the gadgets CRD and added doohickeys.
	testutil.EventuallyGone(t, k8sClient, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: p.crdName(gadgets)}})
	crd := testutil.EventuallyGet(t, k8sClient, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: p.crdName(doohickeys)}})
	assertInstalledBy(t, crd, ce.Name)

	eventuallyRoles(t, ce.Name, wantRoles(p, apisV2))
	for _, k := range names.RoleKinds {
		assert.True(t, notFound(t, names.ExtensionRole(p.crdName(gadgets), k)), "role %s of the dropped API", k)
	}
	waitPolicy(t, named.Name, metav1.ConditionFalse, oriav1alpha1.ReasonAPINotFound, p.crdName(gadgets))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &oriav1alpha1.RBACPolicy{}
		require.NoError(c, k8sClient.Get(ctx, client.ObjectKeyFromObject(all), got))
		assert.ElementsMatch(c, []string{p.crdName(widgets), p.crdName(fleets), p.crdName(doohickeys)}, got.Status.APIs)
	}, testutil.Timeout, testutil.Interval)
	waitPolicy(t, all.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	eventuallyAccess(t, true,
		access(p, "alice", "create", widgets, ns),
		access(p, "carol", "list", doohickeys, ""),
		access(p, "carol", "list", fleets, ""),
	)
	eventuallyAccess(t, false,
		access(p, "alice", "delete", gadgets, ns),
		access(p, "carol", "list", gadgets, ""),
	)
}

// TestUninstall: deleting the ClusterExtension makes operator-controller's
// objects go (garbage collection) and oria's with them; the policy says the
// extension is gone and its access is revoked.
func TestUninstall(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	p := newPackage("uninstall")
	serveCatalog(t, p, release{version: "1.0.0", apis: apisV1})
	ns := p.name
	ce := install(t, p, oriav1alpha1.RBACModeFineGrained, "")
	waitRBACManaged(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
	eventuallyRoles(t, ce.Name, wantRoles(p, apisV1))
	pol := policy(t, p, oriav1alpha1.AccessView, "dave", []string{ns}, widgets, gadgets)
	waitPolicy(t, pol.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	eventuallyAccess(t, true, access(p, "dave", "list", widgets, ns), access(p, "dave", "list", gadgets, ns))

	require.NoError(t, k8sClient.Delete(ctx, ce))
	testutil.EventuallyGone(t, k8sClient, ce)
	collectCRDs(t, p)
	testutil.EventuallyGone(t, k8sClient, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: p.bundleRoleName()}})
	eventuallyRoles(t, ce.Name, nil)
	waitPolicy(t, pol.Name, metav1.ConditionFalse, oriav1alpha1.ReasonExtensionNotFound)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		rbs := &rbacv1.RoleBindingList{}
		require.NoError(c, k8sClient.List(ctx, rbs, client.InNamespace(ns), client.MatchingLabels{oriav1alpha1.LabelManaged: oriav1alpha1.ManagedValue}))
		var oria []string
		for _, rb := range rbs.Items {
			oria = append(oria, rb.Name)
		}
		assert.Empty(c, oria, "oria's RoleBindings of the policy")
	}, testutil.Timeout, testutil.Interval)
	eventuallyAccess(t, false, access(p, "dave", "list", widgets, ns), access(p, "dave", "list", gadgets, ns))
	assert.True(t, apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(ce), &ocv1.ClusterExtension{})))
}

// TestBundleRoleAfterGeneratedRole: a Legacy extension whose 1.0.0 bundle
// ships no view role for widgets (oria generates it) is upgraded to 1.1.0,
// which ships one under that name. oria's role carries Helm's adoption
// metadata for the extension's release, so Helm adopts it in place and the
// upgrade goes through; oria then hands the role over, keeping only the
// aggregation label, and both controllers go quiet (no write by either
// for a minute). A viewer's access is checked every 100 ms through the
// upgrade: it never lapses.
func TestBundleRoleAfterGeneratedRole(t *testing.T) {
	testutil.NeedCluster(t)
	p := newPackage("takeover")
	serveCatalog(t, p, release{version: "1.0.0", apis: apisV1, noBundleRole: true}, release{version: "1.1.0", apis: apisV1})
	ns := p.name
	ce := install(t, p, oriav1alpha1.RBACModeLegacy, "1.0.0")
	bindBuiltin(t, "view", "viewer", ns)
	waitRBACManaged(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy)
	// 1.0.0 ships no role: oria generates widgets' view role too.
	eventuallyRoles(t, ce.Name, append(wantRoles(p, apisV1), p.bundleRoleName()))
	viewer := access(p, "viewer", "list", widgets, ns)
	eventuallyAccess(t, true, viewer)
	generated := bundleRole(t, p)

	gap := watchAccess(t, viewer, 100*time.Millisecond)
	upgraded := &ocv1.ClusterExtension{ObjectMeta: metav1.ObjectMeta{Name: ce.Name}}
	testutil.Update(t, k8sClient, upgraded, func() { upgraded.Spec.Source.Catalog.Version = "1.1.0" })
	waitInstalled(t, ce.Name, "1.1.0")
	handedOver(t, p, ce.Name, oriav1alpha1.LabelAggregateToView)
	settled(t, ns, time.Minute)
	worst, checks, denied := gap.stop()
	t.Logf("access gap through the upgrade: worst %s, %d of %d checks every 100 ms denied", worst, denied, checks)
	assert.Zero(t, denied, "the viewer lost access during the upgrade (worst gap %s)", worst)

	role := bundleRole(t, p)
	assert.Equal(t, generated.UID, role.UID, "adopted in place, never deleted")
	eventuallyRoles(t, ce.Name, wantRoles(p, apisV1))
	eventuallyAccess(t, true, viewer)
	waitRBACManaged(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy)
}

// TestModeAtCreation: the mode is set on the ClusterExtension when it is
// created, so oria may generate a role before Helm installs the bundle's
// under the same name. The install goes through either way, the bundle ends
// up owning its role, and both controllers go quiet.
func TestModeAtCreation(t *testing.T) {
	testutil.NeedCluster(t)
	for _, mode := range []oriav1alpha1.RBACMode{oriav1alpha1.RBACModeLegacy, oriav1alpha1.RBACModeFineGrained} {
		t.Run(string(mode), func(t *testing.T) {
			p := newPackage("atcreation")
			serveCatalog(t, p, release{version: "1.0.0", apis: apisV1})
			ns := p.name
			ce := installAnnotated(t, p, mode, "")
			reason := oriav1alpha1.ReasonLegacy
			agg := oriav1alpha1.LabelAggregateToView
			if mode == oriav1alpha1.RBACModeFineGrained {
				reason, agg = oriav1alpha1.ReasonFineGrained, ""
			}
			waitRBACManaged(t, ce.Name, metav1.ConditionTrue, reason)
			handedOver(t, p, ce.Name, agg)
			eventuallyRoles(t, ce.Name, wantRoles(p, apisV1))
			settled(t, ns, 10*time.Second)
			if mode == oriav1alpha1.RBACModeLegacy {
				bindBuiltin(t, "view", "viewer", ns)
				eventuallyAccess(t, true, access(p, "viewer", "list", widgets, ns))
			} else {
				pol := policy(t, p, oriav1alpha1.AccessView, "bob", []string{ns}, widgets)
				waitPolicy(t, pol.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
				eventuallyAccess(t, true, access(p, "bob", "list", widgets, ns))
			}
		})
	}
}

// handedOver waits until the bundle's widgets view role is the bundle's
// (installed by operator-controller for ext) and carries nothing of oria's
// but, when agg is not empty, that aggregation label, held by oria's field
// manager alone among oria's entries.
func handedOver(t *testing.T, p operatorPackage, ext, agg string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		role := bundleRole(c, p)
		assertInstalledBy(c, role, ext)
		for _, k := range []string{oriav1alpha1.LabelManaged, oriav1alpha1.LabelExtension, oriav1alpha1.LabelRole} {
			assert.NotContains(c, role.Labels, k)
		}
		assert.NotContains(c, role.Annotations, oriav1alpha1.AnnotationCRD)
		var oria []string
		for _, e := range role.ManagedFields {
			if e.Manager == oriav1alpha1.FieldOwner {
				oria = append(oria, string(e.Operation)+" "+string(e.FieldsV1.Raw))
			}
		}
		if agg == "" {
			assert.NotContains(c, role.Labels, oriav1alpha1.LabelAggregateToView)
			assert.Empty(c, oria)
		} else {
			assert.Equal(c, "true", role.Labels[agg])
			assert.Equal(c, []string{`Apply {"f:metadata":{"f:labels":{"f:` + agg + `":{}}}}`}, oria)
		}
	}, testutil.Timeout, testutil.Interval)
}

// settled waits until neither oria nor operator-controller writes for
// quiet to the objects of the package whose namespace is ns (all named
// after it; TestNoFight watches the whole cluster).
func settled(t *testing.T, ns string, quiet time.Duration) {
	t.Helper()
	w := watchWritesOf(t, []string{ns}, ns)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n := w.count()
		time.Sleep(quiet)
		assert.Equal(c, n, w.count(), "writes while settling: %v", w.since(n))
	}, 2*time.Minute+quiet, time.Second, "oria and operator-controller do not settle on the bundle's role")
}
