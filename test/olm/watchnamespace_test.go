package olm

import (
	"context"
	"testing"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
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

			// operator-controller installed it for that namespace only. A
			// failure says what operator-controller was given: that is how
			// a ClusterExtension CRD without spec.config (the suite's, once)
			// showed.
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				dep := &appsv1.Deployment{}
				if !assert.NoError(c, k8sClient.Get(context.Background(), client.ObjectKey{Namespace: p.name, Name: p.name + "-operator"}, dep)) {
					return
				}
				got := &ocv1.ClusterExtension{}
				if !assert.NoError(c, k8sClient.Get(context.Background(), client.ObjectKeyFromObject(ce), got)) {
					return
				}
				assert.Equal(c, watched, dep.Spec.Template.Annotations["olm.targetNamespaces"],
					"the operator's target namespaces (the ClusterExtension's spec.config: %s; the Deployment's template annotations: %v)",
					configOf(got), dep.Spec.Template.Annotations)
			}, testutil.Timeout, testutil.Interval)
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

// installWatching installs p, without a mode, with
// spec.config.inline.watchNamespace set to watched (installWith).
func installWatching(t *testing.T, p operatorPackage, watched string) *ocv1.ClusterExtension {
	t.Helper()
	return installWith(t, p, installOptions{watchNamespace: watched})
}

// configOf returns ce's spec.config as JSON, for a failure's message.
func configOf(ce *ocv1.ClusterExtension) string {
	if ce.Spec.Config == nil || ce.Spec.Config.Inline == nil {
		return "none"
	}
	return string(ce.Spec.Config.Inline.Raw)
}
