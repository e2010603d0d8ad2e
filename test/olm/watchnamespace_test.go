package olm

import (
	"context"
	"encoding/json"
	"testing"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestWatchNamespace: an extension installed in SingleNamespace mode
// (spec.config.inline.watchNamespace names another namespace) or in
// OwnNamespace mode (it names the install namespace) is, to oria, like one
// installed for all namespaces. Its CRDs are cluster-wide, and so are the
// roles oria generates (the same names, the bundle's role used as before);
// Legacy aggregates them wherever the built-in roles are bound, and an
// RBACPolicy grants exactly its own namespaces: the watched one, or one the
// operator does not watch (oria does not read watchNamespace).
func TestWatchNamespace(t *testing.T) {
	testutil.NeedCluster(t)
	needWatchNamespace(t)
	for _, tc := range []struct {
		name string
		own  bool // OwnNamespace: watch the install namespace
	}{
		{name: "SingleNamespace"},
		{name: "OwnNamespace", own: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPackage("watchns")
			serveCatalog(t, p, release{version: "1.0.0", apis: apisV1, namespaced: true})
			watched := p.name
			if !tc.own {
				watched = p.name + "-watched"
				testutil.Create(t, k8sClient, testutil.Namespace(watched, nil))
				t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), testutil.Namespace(watched, nil)) })
			}
			ce := installWatching(t, p, watched)

			// operator-controller installed it for that namespace only.
			dep := &appsv1.Deployment{}
			require.NoError(t, k8sClient.Get(context.Background(), client.ObjectKey{Namespace: p.name, Name: p.name + "-operator"}, dep))
			assert.Equal(t, watched, dep.Spec.Template.Annotations["olm.targetNamespaces"], "the operator's target namespaces")
			assertInstalledBy(t, bundleRole(t, p), ce.Name)

			testutil.SetRBACMode(t, k8sClient, ce.Name, oriav1alpha1.RBACModeFineGrained)
			waitRBACManaged(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
			eventuallyRoles(t, ce.Name, wantRoles(p, apisV1))
			inWatched := policy(t, p, oriav1alpha1.AccessView, "watch-bob", []string{watched}, widgets, gadgets)
			elsewhere := policy(t, p, oriav1alpha1.AccessEdit, "watch-carol", []string{"default"}, gadgets)
			waitPolicy(t, inWatched.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
			waitPolicy(t, elsewhere.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
			eventuallyAccess(t, true,
				access(p, "watch-bob", "list", widgets, watched), // the bundle's role
				access(p, "watch-bob", "get", gadgets, watched),
				access(p, "watch-carol", "create", gadgets, "default"),
			)
			eventuallyAccess(t, false,
				access(p, "watch-bob", "create", widgets, watched),
				access(p, "watch-bob", "list", widgets, "default"),
				access(p, "watch-bob", "list", fleets, ""),
				access(p, "watch-carol", "create", gadgets, watched),
			)

			testutil.SetRBACMode(t, k8sClient, ce.Name, oriav1alpha1.RBACModeLegacy)
			waitRBACManaged(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy)
			bindBuiltin(t, "edit", "watch-editor", watched)
			eventuallyAccess(t, true,
				access(p, "watch-editor", "create", widgets, watched),
				access(p, "watch-editor", "delete", gadgets, watched),
			)
			eventuallyAccess(t, false, access(p, "watch-editor", "create", widgets, "default"))
			eventuallyRoles(t, ce.Name, wantRoles(p, apisV1))
		})
	}
}

// installWatching is install (helpers_test.go) with
// spec.config.inline.watchNamespace set to watched at creation, and no
// mode: it creates the namespace p.name with an installer ServiceAccount
// bound to installerRole, and the ClusterExtension, and waits until
// operator-controller reports it Installed. The clean-up deletes the
// ClusterExtension and waits until it and its CRDs are gone.
func installWatching(t *testing.T, p operatorPackage, watched string) *ocv1.ClusterExtension {
	t.Helper()
	ns := p.name
	testutil.Create(t, k8sClient, testutil.Namespace(ns, nil))
	testutil.Create(t, k8sClient, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "installer", Namespace: ns}})
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: p.name + "-installer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: installerRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "installer", Namespace: ns}},
	}
	testutil.Create(t, k8sClient, crb)
	config, err := json.Marshal(map[string]string{"watchNamespace": watched})
	require.NoError(t, err)
	ce := &ocv1.ClusterExtension{
		ObjectMeta: metav1.ObjectMeta{Name: p.name},
		Spec: ocv1.ClusterExtensionSpec{
			Namespace:      ns,
			ServiceAccount: ocv1.ServiceAccountReference{Name: "installer"},
			Source: ocv1.SourceConfig{
				SourceType: ocv1.SourceTypeCatalog,
				Catalog:    &ocv1.CatalogFilter{PackageName: p.name},
			},
			Config: &ocv1.ClusterExtensionConfig{
				ConfigType: ocv1.ClusterExtensionConfigTypeInline,
				Inline:     &apiextensionsv1.JSON{Raw: config},
			},
		},
	}
	testutil.Create(t, k8sClient, ce)
	t.Cleanup(func() {
		ctx := context.Background()
		_ = k8sClient.Delete(ctx, ce)
		testutil.EventuallyGone(t, k8sClient, ce)
		collectCRDs(t, p)
		_ = k8sClient.Delete(ctx, crb)
		_ = k8sClient.Delete(ctx, testutil.Namespace(ns, nil))
	})
	return waitInstalled(t, ce.Name, "")
}
