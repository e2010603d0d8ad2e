package olm

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/testutil"
)

// newPackage returns a package (and API group) of the test's own.
func newPackage(prefix string) operatorPackage {
	n := testutil.UniqueName(prefix)
	return operatorPackage{name: n, group: n + ".olm-e2e.example.com"}
}

// serveCatalog publishes releases of p and creates a ClusterCatalog of
// them, named after the package, and waits until catalogd serves it.
func serveCatalog(t *testing.T, p operatorPackage, releases ...release) {
	t.Helper()
	ctx := context.Background()
	ref, err := p.publish(ctx, releases...)
	require.NoError(t, err)
	cat := &unstructured.Unstructured{}
	cat.SetAPIVersion(ocv1.GroupVersion.String())
	cat.SetKind("ClusterCatalog")
	cat.SetName(p.name)
	require.NoError(t, unstructured.SetNestedMap(cat.Object, map[string]any{
		"source": map[string]any{"type": "Image", "image": map[string]any{"ref": ref}},
	}, "spec"))
	testutil.Create(t, k8sClient, cat)
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), cat) })
	testutil.EventuallyCondition(t, k8sClient, cat, testutil.Condition{Type: ocv1.TypeServing, Status: metav1.ConditionTrue})
}

// install creates the namespace p.name with an installer ServiceAccount
// bound to installerRole, and a ClusterExtension p.name installing p (at
// version, when not empty) into it, waits until operator-controller reports
// it Installed, then sets mode (none: oria's default). The clean-up
// deletes the ClusterExtension and waits until it and its CRDs are gone.
func install(t *testing.T, p operatorPackage, mode oriav1alpha1.RBACMode, version string) *ocv1.ClusterExtension {
	t.Helper()
	return installWith(t, p, installOptions{mode: mode, version: version})
}

// installAnnotated is install with mode set on the ClusterExtension when it
// is created: oria may then see the CRDs before Helm has created the
// bundle's ClusterRoles, and generate one of them first.
func installAnnotated(t *testing.T, p operatorPackage, mode oriav1alpha1.RBACMode, version string) *ocv1.ClusterExtension {
	t.Helper()
	return installWith(t, p, installOptions{mode: mode, version: version, atCreation: true})
}

// installOptions say how installWith installs a package.
type installOptions struct {
	mode    oriav1alpha1.RBACMode
	version string
	// atCreation sets mode on the ClusterExtension when it is created.
	atCreation bool
	// watchNamespace, when set, is the install's inline
	// config.watchNamespace (SingleNamespace and OwnNamespace modes).
	watchNamespace string
}

func installWith(t *testing.T, p operatorPackage, o installOptions) *ocv1.ClusterExtension {
	t.Helper()
	mode, version, atCreation := o.mode, o.version, o.atCreation
	ns := p.name
	testutil.Create(t, k8sClient, testutil.Namespace(ns, nil))
	testutil.Create(t, k8sClient, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "installer", Namespace: ns}})
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: p.name + "-installer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: installerRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "installer", Namespace: ns}},
	}
	testutil.Create(t, k8sClient, crb)
	ce := &ocv1.ClusterExtension{
		ObjectMeta: metav1.ObjectMeta{Name: p.name},
		Spec: ocv1.ClusterExtensionSpec{
			Namespace:      ns,
			ServiceAccount: ocv1.ServiceAccountReference{Name: "installer"},
			Source: ocv1.SourceConfig{
				SourceType: ocv1.SourceTypeCatalog,
				Catalog:    &ocv1.CatalogFilter{PackageName: p.name, Version: version},
			},
		},
	}
	if atCreation {
		ce.Annotations = map[string]string{oriav1alpha1.AnnotationRBACMode: string(mode)}
	}
	if o.watchNamespace != "" {
		config, err := json.Marshal(map[string]string{"watchNamespace": o.watchNamespace})
		require.NoError(t, err)
		ce.Spec.Config = &ocv1.ClusterExtensionConfig{
			ConfigType: ocv1.ClusterExtensionConfigTypeInline,
			Inline:     &apiextensionsv1.JSON{Raw: config},
		}
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
	waitInstalled(t, ce.Name, "")
	if mode != "" && !atCreation {
		// As an admin does: `kubectl annotate` once it is installed.
		testutil.SetRBACMode(t, k8sClient, ce.Name, mode)
	}
	return ce
}

// waitInstalled waits until operator-controller reports the extension
// Installed (at version, when not empty) and returns it.
func waitInstalled(t *testing.T, name, version string) *ocv1.ClusterExtension {
	t.Helper()
	ce, _ := testutil.EventuallyCondition(t, k8sClient, &ocv1.ClusterExtension{ObjectMeta: metav1.ObjectMeta{Name: name}},
		testutil.Condition{Type: ocv1.TypeInstalled, Status: metav1.ConditionTrue})
	if version != "" {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			got := &ocv1.ClusterExtension{}
			require.NoError(c, k8sClient.Get(context.Background(), client.ObjectKey{Name: name}, got))
			require.NotNil(c, got.Status.Install, "status.install")
			assert.Equal(c, version, got.Status.Install.Bundle.Version)
			ce = got
		}, testutil.Timeout, testutil.Interval)
	}
	return ce
}

// waitRBACManaged waits for oria's condition on the extension.
func waitRBACManaged(t *testing.T, name string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	_, cond := testutil.EventuallyCondition(t, k8sClient, &ocv1.ClusterExtension{ObjectMeta: metav1.ObjectMeta{Name: name}},
		testutil.Condition{Type: oriav1alpha1.TypeRBACManaged, Status: status, Reason: reason})
	return cond
}

// waitPolicy waits for the Ready condition of an RBACPolicy.
func waitPolicy(t *testing.T, name string, status metav1.ConditionStatus, reason string, message ...string) *oriav1alpha1.RBACPolicy {
	t.Helper()
	p, _ := testutil.EventuallyCondition(t, k8sClient, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}},
		testutil.Condition{Type: oriav1alpha1.TypeReady, Status: status, Reason: reason, Message: message})
	return p
}

// policy creates an RBACPolicy granting access to user (in namespaces,
// cluster-wide when none) on the given APIs of p (all when none), deleted
// when the test ends.
func policy(t *testing.T, p operatorPackage, access oriav1alpha1.Access, user string, namespaces []string, apis ...api) *oriav1alpha1.RBACPolicy {
	t.Helper()
	pol := &oriav1alpha1.RBACPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName(p.name)},
		Spec: oriav1alpha1.RBACPolicySpec{
			ExtensionName: p.name, Access: access, Namespaces: namespaces,
			Subjects: []rbacv1.Subject{testutil.User(user)},
		},
	}
	for _, a := range apis {
		pol.Spec.APIs = append(pol.Spec.APIs, oriav1alpha1.APIRef{Group: p.group, Resource: a.plural})
	}
	testutil.Create(t, k8sClient, pol)
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), pol) })
	return pol
}

// bindBuiltin binds the built-in ClusterRole role (admin, edit, view) to
// user in namespace ns, or cluster-wide when ns is empty.
func bindBuiltin(t *testing.T, role, user, ns string) {
	t.Helper()
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
	subjects := []rbacv1.Subject{testutil.User(user)}
	var obj client.Object
	if ns == "" {
		obj = &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName(user)}, RoleRef: ref, Subjects: subjects}
	} else {
		obj = &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName(user), Namespace: ns}, RoleRef: ref, Subjects: subjects}
	}
	testutil.Create(t, k8sClient, obj)
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), obj) })
}

// access is a check of user's verb on a of p, in ns.
func access(p operatorPackage, user, verb string, a api, ns string) testutil.Access {
	return testutil.Access{User: user, Verb: verb, Group: p.group, Resource: a.plural, Namespace: ns}
}

// eventuallyAccess waits until every check has the wanted answer from the
// API server's authorizer (SubjectAccessReview).
func eventuallyAccess(t *testing.T, want bool, checks ...testutil.Access) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, a := range checks {
			ok, err := testutil.Allowed(context.Background(), k8sClient, a)
			require.NoError(c, err)
			assert.Equal(c, want, ok, "%s", a)
		}
	}, testutil.Timeout, testutil.Interval)
}

// generatedRoles lists the names of the ClusterRoles oria generated for
// the extension (its label), sorted.
func generatedRoles(t require.TestingT, ext string) []string {
	list := &rbacv1.ClusterRoleList{}
	require.NoError(t, k8sClient.List(context.Background(), list, client.MatchingLabels{
		oriav1alpha1.LabelManaged: oriav1alpha1.ManagedValue, oriav1alpha1.LabelExtension: names.LabelValue(ext),
	}))
	var out []string
	for _, r := range list.Items {
		out = append(out, r.Name)
	}
	return out
}

// wantRoles is the names of the roles oria generates for apis of p: four
// per API, but the bundle provides widgets' view role.
func wantRoles(p operatorPackage, apis []api) []string {
	var out []string
	for _, a := range apis {
		for _, k := range names.RoleKinds {
			if n := names.ExtensionRole(p.crdName(a), k); n != p.bundleRoleName() {
				out = append(out, n)
			}
		}
	}
	return out
}

// eventuallyRoles waits until oria's generated roles of the extension are
// exactly want.
func eventuallyRoles(t *testing.T, ext string, want []string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.ElementsMatch(c, want, generatedRoles(c, ext))
	}, testutil.Timeout, testutil.Interval)
}

// bundleRole reads the ClusterRole the bundle ships.
func bundleRole(t require.TestingT, p operatorPackage) *rbacv1.ClusterRole {
	r := &rbacv1.ClusterRole{}
	require.NoError(t, k8sClient.Get(context.Background(), client.ObjectKey{Name: p.bundleRoleName()}, r))
	return r
}

// assertInstalledBy checks that operator-controller installed obj for
// the extension: its owner labels, and Helm's.
func assertInstalledBy(t assert.TestingT, obj metav1.Object, ext string) {
	l := obj.GetLabels()
	assert.Equal(t, oriav1alpha1.OLMOwnerKindClusterExtension, l[oriav1alpha1.LabelOLMOwnerKind], "%s", obj.GetName())
	assert.Equal(t, ext, l[oriav1alpha1.LabelOLMOwnerName], "%s", obj.GetName())
	assert.Equal(t, "Helm", l["app.kubernetes.io/managed-by"], "%s", obj.GetName())
	assert.True(t, strings.HasPrefix(obj.GetAnnotations()["meta.helm.sh/release-name"], ext), "%s: meta.helm.sh/release-name", obj.GetName())
}

// notFound reports whether the named ClusterRole does not exist.
func notFound(t require.TestingT, role string) bool {
	err := k8sClient.Get(context.Background(), client.ObjectKey{Name: role}, &rbacv1.ClusterRole{})
	if err != nil && !apierrors.IsNotFound(err) {
		require.NoError(t, err)
	}
	return apierrors.IsNotFound(err)
}

// gcGrace is how long collectCRDs lets kube-controller-manager's garbage
// collector delete an uninstalled extension's CRDs before deleting them
// itself.
const gcGrace = 30 * time.Second

// collectCRDs waits until the CRDs of p (owned by its deleted
// ClusterExtension) are gone. The garbage collector deletes them; when it
// has not within gcGrace, the test deletes them as the collector would.
// Each package of this suite installs and deletes CRDs, and the collector
// pauses its workers until every resource monitor has synced, including
// monitors of CRDs deleted since its last discovery (kube-controller-
// manager logs "Failed to watch ... could not find the requested
// resource" for them): on a loaded machine that pause outlasted two
// minutes. What this suite tests is oria's reaction to the CRDs going,
// not the collector's latency.
func collectCRDs(t *testing.T, p operatorPackage) {
	t.Helper()
	var crds []client.Object
	for _, a := range append(append([]api{}, apisV1...), doohickeys) {
		crds = append(crds, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: p.crdName(a)}})
	}
	deadline := time.Now().Add(gcGrace)
	for time.Now().Before(deadline) && len(present(t, crds)) > 0 {
		time.Sleep(testutil.Interval)
	}
	if left := present(t, crds); len(left) > 0 {
		t.Logf("the garbage collector left %d CRD(s) of %s after %s; deleting them", len(left), p.name, gcGrace)
		for _, crd := range left {
			require.NoError(t, client.IgnoreNotFound(k8sClient.Delete(context.Background(), crd)))
		}
	}
	testutil.EventuallyGone(t, k8sClient, crds...)
}

// present returns those of objs that still exist.
func present(t *testing.T, objs []client.Object) []client.Object {
	t.Helper()
	var out []client.Object
	for _, o := range objs {
		err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object))
		if err == nil {
			out = append(out, o)
		} else if !apierrors.IsNotFound(err) {
			t.Logf("reading %s: %v", o.GetName(), err)
			out = append(out, o)
		}
	}
	return out
}

// accessWatch polls one access check (a SubjectAccessReview) at a fixed
// interval and records how long it was denied.
type accessWatch struct {
	stopped chan struct{}
	done    chan struct{}
	worst   time.Duration
	checks  int
	denied  int
}

// watchAccess starts polling a, which must be allowed now, every interval.
func watchAccess(t *testing.T, a testutil.Access, interval time.Duration) *accessWatch {
	t.Helper()
	w := &accessWatch{stopped: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		var since time.Time
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-w.stopped:
				if !since.IsZero() {
					w.worst = max(w.worst, time.Since(since))
				}
				return
			case <-tick.C:
			}
			ok, err := testutil.Allowed(context.Background(), k8sClient, a)
			if err != nil {
				continue
			}
			w.checks++
			now := time.Now()
			switch {
			case !ok && since.IsZero():
				since = now
				w.denied++
			case !ok:
				w.denied++
			case ok && !since.IsZero():
				w.worst = max(w.worst, now.Sub(since))
				since = time.Time{}
			}
		}
	}()
	t.Cleanup(func() { _, _, _ = w.stop() })
	return w
}

// stop ends the polling and returns the longest denial, the checks made
// and how many were denied.
func (w *accessWatch) stop() (worst time.Duration, checks, denied int) {
	select {
	case <-w.stopped:
	default:
		close(w.stopped)
	}
	<-w.done
	return w.worst, w.checks, w.denied
}
