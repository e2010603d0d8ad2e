package e2e

import (
	"context"
	"testing"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller/extension"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestExtensionRBACModes installs an extension (a ClusterExtension and a CRD
// labelled as operator-controller labels it) and checks, with
// SubjectAccessReviews against the real authorizer while
// kube-controller-manager aggregates ClusterRoles, what users bound to the
// built-in view, edit and admin ClusterRoles may do with its API in each
// mode:
//   - Legacy: view reads, edit writes, admin does everything (through
//     RoleBindings in a namespace); a ClusterRoleBinding to view also gets the
//     CRD itself (cluster-scoped, which a RoleBinding cannot grant).
//   - FineGrained and Unmanaged: none of them can.
func TestExtensionRBACModes(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	grp := testutil.UniqueName("e2e") + ".example.com"
	crdName := "widgets." + grp
	ext := testutil.ClusterExtension(testutil.UniqueName("widgets"), oriav1alpha1.RBACModeLegacy)
	testutil.Create(t, k8sClient, ext)
	crd := testutil.CRD(grp, "widgets", "Widget", ext.Name)
	testutil.Create(t, k8sClient, crd)

	ns := testutil.Namespace(testutil.UniqueName("team"), nil)
	other := testutil.Namespace(testutil.UniqueName("other"), nil)
	for _, n := range []client.Object{ns, other} {
		testutil.Create(t, k8sClient, n)
	}
	viewer, editor, admin, clusterViewer := testutil.UniqueName("viewer"), testutil.UniqueName("editor"), testutil.UniqueName("admin"), testutil.UniqueName("cviewer")
	bind := func(obj client.Object) {
		testutil.Create(t, k8sClient, obj)
	}
	for user, role := range map[string]string{viewer: "view", editor: "edit", admin: "admin"} {
		bind(&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		})
	}
	bind(&rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: clusterViewer},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: clusterViewer}},
	})

	var generatedRoles []client.Object
	for _, k := range names.RoleKinds {
		generatedRoles = append(generatedRoles, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: names.ExtensionRole(crdName, k)}})
	}

	cr := func(user, verb, namespace string) testutil.Access {
		return testutil.Access{User: user, Verb: verb, Group: grp, Resource: "widgets", Namespace: namespace}
	}
	getCRD := func(user string) testutil.Access {
		return testutil.Access{User: user, Verb: "get", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: crdName}
	}
	// What Legacy mode grants, and FineGrained / Unmanaged must not.
	granted := []testutil.Access{
		cr(viewer, "get", ns.Name), cr(viewer, "list", ns.Name), cr(viewer, "watch", ns.Name),
		cr(editor, "create", ns.Name), cr(editor, "update", ns.Name), cr(editor, "patch", ns.Name), cr(editor, "delete", ns.Name),
		cr(editor, "get", ns.Name),
		cr(admin, "create", ns.Name), cr(admin, "delete", ns.Name), cr(admin, "deletecollection", ns.Name), cr(admin, "list", ns.Name),
		cr(clusterViewer, "list", ""), cr(clusterViewer, "get", ns.Name),
		getCRD(clusterViewer),
	}
	// What no mode grants: writes for viewers, other namespaces for
	// RoleBindings, the cluster-scoped CRD through a RoleBinding.
	neverGranted := []testutil.Access{
		cr(viewer, "create", ns.Name), cr(viewer, "delete", ns.Name),
		cr(editor, "deletecollection", ns.Name),
		cr(viewer, "list", other.Name), cr(editor, "create", other.Name), cr(admin, "delete", other.Name),
		cr(clusterViewer, "create", ns.Name),
		getCRD(viewer),
	}

	t.Run("Legacy", func(t *testing.T) {
		waitExtensionCondition(t, ext.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy)
		eventuallyAccess(t, true, granted...)
		eventuallyAccess(t, false, neverGranted...)
	})

	t.Run("FineGrained", func(t *testing.T) {
		testutil.SetRBACMode(t, k8sClient, ext.Name, oriav1alpha1.RBACModeFineGrained)
		waitExtensionCondition(t, ext.Name, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
		// The roles exist, for RBACPolicies to bind, but aggregate nowhere.
		for _, k := range names.RoleKinds {
			r := &rbacv1.ClusterRole{}
			require.NoError(t, k8sClient.Get(ctx, client.ObjectKey{Name: names.ExtensionRole(crdName, k)}, r))
			assert.NotContains(t, r.Labels, extension.AggregationLabel(k))
		}
		eventuallyAccess(t, false, append(granted, neverGranted...)...)
	})

	t.Run("Legacy again", func(t *testing.T) {
		testutil.SetRBACMode(t, k8sClient, ext.Name, oriav1alpha1.RBACModeLegacy)
		waitExtensionCondition(t, ext.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy)
		eventuallyAccess(t, true, granted...)
	})

	t.Run("Unmanaged", func(t *testing.T) {
		testutil.SetRBACMode(t, k8sClient, ext.Name, oriav1alpha1.RBACModeUnmanaged)
		cond := waitExtensionCondition(t, ext.Name, metav1.ConditionFalse, oriav1alpha1.ReasonUnmanaged)
		assert.Contains(t, cond.Message, "not managed by oria")
		// The generated roles are removed.
		testutil.EventuallyGone(t, k8sClient, generatedRoles...)
		eventuallyAccess(t, false, append(granted, neverGranted...)...)
	})

	t.Run("default mode of the binary is Unmanaged", func(t *testing.T) {
		// The suite runs oria with --default-rbac-mode=Unmanaged: removing
		// the annotation keeps the extension unmanaged.
		testutil.SetRBACMode(t, k8sClient, ext.Name, oriav1alpha1.RBACModeLegacy)
		eventuallyAccess(t, true, granted...)
		testutil.SetRBACMode(t, k8sClient, ext.Name, "")
		cond := waitExtensionCondition(t, ext.Name, metav1.ConditionFalse, oriav1alpha1.ReasonUnmanaged)
		assert.Contains(t, cond.Message, "default")
		eventuallyAccess(t, false, granted...)
	})

	t.Run("uninstall revokes access", func(t *testing.T) {
		testutil.SetRBACMode(t, k8sClient, ext.Name, oriav1alpha1.RBACModeLegacy)
		eventuallyAccess(t, true, granted...)
		require.NoError(t, k8sClient.Delete(ctx, ext))
		eventuallyAccess(t, false, granted...)
		for _, k := range names.RoleKinds {
			assert.True(t, apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Name: names.ExtensionRole(crdName, k)}, &rbacv1.ClusterRole{})))
		}
	})
}

// waitExtensionCondition is `kubectl wait --for=condition=RBACManaged` with a
// reason check; it returns the condition.
func waitExtensionCondition(t *testing.T, name string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	_, cond := testutil.EventuallyCondition(t, k8sClient, &ocv1.ClusterExtension{ObjectMeta: metav1.ObjectMeta{Name: name}},
		testutil.Condition{Type: oriav1alpha1.TypeRBACManaged, Status: status, Reason: reason})
	return cond
}
