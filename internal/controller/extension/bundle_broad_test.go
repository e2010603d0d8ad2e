package extension_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller/extension"
	"github.com/operator-framework/oria/internal/genroles"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/localcluster"
)

// startAggregation runs kube-controller-manager's ClusterRole aggregation
// controller (and nothing else: this suite runs no garbage collector) until
// the test ends, so that access through the built-in view, edit and admin
// roles can be checked with SubjectAccessReviews.
func startAggregation(t *testing.T) {
	t.Helper()
	assets, err := localcluster.Assets("")
	require.NoError(t, err)
	port, err := localcluster.FreePort()
	require.NoError(t, err)
	kcm := exec.Command(filepath.Join(assets, "kube-controller-manager"),
		"--kubeconfig="+cluster.Kubeconfig,
		"--authentication-kubeconfig="+cluster.Kubeconfig,
		"--authorization-kubeconfig="+cluster.Kubeconfig,
		"--controllers=clusterrole-aggregation-controller",
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--cert-dir="+t.TempDir(),
	)
	kcm.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	require.NoError(t, kcm.Start())
	t.Cleanup(func() {
		_ = kcm.Process.Signal(syscall.SIGTERM)
		_ = kcm.Wait()
	})
}

// broadRule is what a careless bundle's -view role adds: every user with the
// built-in view role would read secrets.
var broadRule = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}}

// allowed asks the API server whether a is allowed.
func allowed(c require.TestingT, a testutil.Access) bool {
	ok, err := testutil.Allowed(context.Background(), k8sClient, a)
	require.NoError(c, err)
	return ok
}

// grantBuiltin binds the built-in ClusterRole role to user in namespace ns.
func grantBuiltin(t *testing.T, ns, user, role string) {
	t.Helper()
	testutil.Create(t, k8sClient, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-" + role, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{testutil.User(user)},
	})
}

// TestBundleRoleTooBroad: in Legacy mode a bundle-provided -view role that
// grants secrets is not aggregated: nobody gains secrets through the
// built-in view role, the condition says why (BundleRoleTooBroad, naming
// the role and the rule, with a Warning Event), and the extension's other
// roles are generated and aggregated all the same.
func TestBundleRoleTooBroad(t *testing.T) {
	testutil.NeedCluster(t)
	startAggregation(t)
	e := startManager(t, extension.Options{DefaultMode: unmanaged})
	g := group()
	crd := "foos." + g
	ce := newExtension(t, legacy)
	viewName := names.ExtensionRole(crd, names.RoleView)
	bundleRole(t, ce.Name, crd, names.RoleView, nil, append(genroles.Rules(crd, names.RoleView), broadRule)...)
	addCRD(t, ce.Name, crd)

	cond := waitCondition(t, ce.Name, metav1.ConditionFalse, oriav1alpha1.ReasonBundleRoleTooBroad, viewName, `"secrets"`,
		"The extension's other ClusterRoles are in place (mode Legacy)")
	t.Logf("condition: %s", cond.Message)
	testutil.EventuallyEvents(t, k8sClient, "ClusterExtension", ce.Name, extension.EventTooBroad)
	// The other three roles are generated and aggregated.
	waitRoles(t, ce, legacy, []string{crd}, viewName)
	assert.NotContains(t, getRole(t, viewName).Labels, oriav1alpha1.LabelAggregateToView)
	assert.Empty(t, oriaFields(getRole(t, viewName)), "oria wrote to the too-broad role")
	assertQuiet(t, e, ce.Name)

	ns := testutil.CreateNamespace(t, k8sClient, "broad", nil)
	viewer, editor := testutil.UniqueName("viewer"), testutil.UniqueName("editor")
	grantBuiltin(t, ns, viewer, "view")
	grantBuiltin(t, ns, editor, "edit")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		// The aggregation controller has seen the extension's roles: edit
		// holds the generated edit rules, view the generated crdview
		// rule...
		assert.True(c, allowed(c, testutil.Access{User: editor, Verb: "create", Group: g, Resource: "foos", Namespace: ns}), "edit lacks the generated edit role")
		viewRules := getRole(c, "view").Rules
		assert.True(c, slices.ContainsFunc(viewRules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.ResourceNames, crd) }),
			"view lacks the generated view-crdview role")
		// ...and not the bundle's view role.
		assert.False(c, slices.ContainsFunc(viewRules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "secrets") }),
			"view aggregated secrets")
	}, 2*testutil.Timeout, testutil.Interval)
	for _, a := range []testutil.Access{
		{User: viewer, Verb: "get", Resource: "secrets", Namespace: ns, Name: "any"},
		{User: viewer, Verb: "list", Resource: "secrets", Namespace: ns},
		// The withheld role grants nothing, not even its within part.
		{User: viewer, Verb: "list", Group: g, Resource: "foos", Namespace: ns},
	} {
		assert.False(t, allowed(t, a), "%s is allowed", a)
	}
}

// TestBundleRoleBecomesTooBroad: a bundle role oria aggregated loses oria's
// aggregation label as soon as an edit makes it reach beyond the extension,
// gets it back when narrowed again, and is reported in FineGrained mode too.
func TestBundleRoleBecomesTooBroad(t *testing.T) {
	testutil.NeedCluster(t)
	e := startManager(t, extension.Options{DefaultMode: unmanaged})
	g := group()
	crd := "foos." + g
	ce := newExtension(t, legacy)
	viewName := names.ExtensionRole(crd, names.RoleView)
	within := []rbacv1.PolicyRule{{APIGroups: []string{g}, Resources: []string{"foos", "foos/status"}, Verbs: []string{"get", "list", "watch"}}}
	view := bundleRole(t, ce.Name, crd, names.RoleView, nil, within...)
	addCRD(t, ce.Name, crd)

	labelled := func(want bool) {
		t.Helper()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			cr := getRole(c, viewName)
			_, has := cr.Labels[oriav1alpha1.LabelAggregateToView]
			assert.Equal(c, want, has, "aggregation label on %s", viewName)
			if !want {
				for _, f := range oriaFields(cr) {
					assert.NotContains(c, f, "f:labels", "oria still owns a label")
				}
			}
		}, testutil.Timeout, testutil.Interval)
	}
	labelled(true)
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy, viewName)

	testutil.Update(t, k8sClient, view, func() { view.Rules = append(view.Rules, broadRule) })
	labelled(false)
	waitCondition(t, ce.Name, metav1.ConditionFalse, oriav1alpha1.ReasonBundleRoleTooBroad, viewName, `"secrets"`)
	testutil.EventuallyEvents(t, k8sClient, "ClusterExtension", ce.Name, extension.EventTooBroad, extension.EventBundleReleased)
	waitRoles(t, ce, legacy, []string{crd}, viewName)
	assertQuiet(t, e, ce.Name)

	// FineGrained: nothing to remove, but still reported (policies do not
	// bind it).
	setMode(t, ce.Name, fineGrained)
	waitCondition(t, ce.Name, metav1.ConditionFalse, oriav1alpha1.ReasonBundleRoleTooBroad, viewName, "(mode FineGrained)")
	setMode(t, ce.Name, legacy)
	waitCondition(t, ce.Name, metav1.ConditionFalse, oriav1alpha1.ReasonBundleRoleTooBroad, viewName, "(mode Legacy)")
	labelled(false)

	// Narrowed again: aggregated again.
	testutil.Update(t, k8sClient, view, func() { view.Rules = within })
	labelled(true)
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy, viewName)
	assertQuiet(t, e, ce.Name)
}
