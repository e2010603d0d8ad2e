package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// extensionWithAPI installs a ClusterExtension in mode with one API, as
// operator-controller would, and returns the API's CRD.
func extensionWithAPI(t *testing.T, mode oriav1alpha1.RBACMode) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	ctx := context.Background()
	ext := testutil.ClusterExtension(testutil.UniqueName("guarded"), mode)
	crd := testutil.CRD(testutil.UniqueName("guard")+".example.com", "gadgets", "Gadget", ext.Name)
	for _, o := range []client.Object{ext, crd} {
		require.NoError(t, k8sClient.Create(ctx, o))
	}
	cleanup(t, ext, crd)
	return crd
}

// TestGuardDelegation: a user with create/update on oria's kinds, made admin
// of one namespace, binds view/edit there through a ScopeInstance and an
// RBACPolicy, exactly as far as Kubernetes would let them bind it by hand,
// and no further.
func TestGuardDelegation(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	carol, asCarol := delegate(t, "carol")
	teamA := createNamespace(t, "team-a", nil)
	teamB := createNamespace(t, "team-b", nil)
	adminOfA := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "carol-admin", Namespace: teamA},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects:   []rbacv1.Subject{testutil.User(carol)},
	}
	require.NoError(t, k8sClient.Create(ctx, adminOfA))
	// Legacy mode: the extension's roles aggregate into admin, so carol
	// holds them in team-a.
	crd := extensionWithAPI(t, oriav1alpha1.RBACModeLegacy)
	plural, group := crd.Spec.Names.Plural, crd.Spec.Group
	eventuallyAccess(t, true, testutil.Access{User: carol, Verb: "delete", Group: group, Resource: plural, Namespace: teamA})

	// ScopeInstance: carol's template binds view and edit to a group, in
	// team-a.
	devs := testutil.UniqueName("devs")
	dev := func(verb, group, resource, ns string) testutil.Access {
		return testutil.Access{User: "dev", Groups: []string{devs}, Verb: verb, Group: group, Resource: resource, Namespace: ns}
	}
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("team-a"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}, {Name: "edit"}},
		rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: devs})
	si := scopeInstance(tmpl.Name, tmpl.Name, teamA)
	require.NoError(t, asCarol.Create(ctx, tmpl))
	require.NoError(t, asCarol.Create(ctx, si), "carol holds view and edit in team-a")
	cleanup(t, tmpl, si)
	waitScopeInstanceReady(t, si.Name)
	eventuallyAccess(t, true, dev("create", "apps", "deployments", teamA), dev("list", "", "pods", teamA))
	eventuallyAccess(t, false, dev("create", "apps", "deployments", teamB), dev("list", "", "pods", ""))

	// A change that leaves the spec alone is not checked.
	require.NoError(t, userUpdate(t, asCarol, si, func() { si.Labels = map[string]string{"team": "a"} }))
	// Widening is refused: another namespace, or a selector instead of the
	// list (a selector can reach any namespace, so it is checked
	// cluster-wide).
	refused(t, userUpdate(t, asCarol, si, func() { si.Spec.Namespaces = []string{teamA, teamB} }),
		`may not bind ClusterRole "edit" in namespace "`+teamB+`"`)
	refused(t, userUpdate(t, asCarol, si, func() {
		si.Spec.Namespaces = nil
		si.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": teamA}}
	}), `may not bind ClusterRole "edit" cluster-wide`)
	// Nor may carol make the template grant more where it is bound.
	refused(t, userUpdate(t, asCarol, tmpl, func() {
		tmpl.Spec.ClusterRoles = append(tmpl.Spec.ClusterRoles, oriav1alpha1.ClusterRoleTemplate{Name: "cluster-admin"})
	}), `may not bind ClusterRole "cluster-admin" in namespace "`+teamA+`"`)

	// RBACPolicy: edit on the extension's API in team-a.
	p := &oriav1alpha1.RBACPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("team-a")},
		Spec: oriav1alpha1.RBACPolicySpec{
			ExtensionName: crd.Labels[oriav1alpha1.LabelOLMOwnerName],
			Access:        oriav1alpha1.AccessEdit,
			Subjects:      []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "pat"}},
			Namespaces:    []string{teamA},
			APIs:          []oriav1alpha1.APIRef{{Group: group, Resource: plural}},
		},
	}
	require.NoError(t, asCarol.Create(ctx, p), "carol holds the extension's roles in team-a")
	cleanup(t, p)
	waitPolicyReady(t, p.Name)
	pat := testutil.Access{User: "pat", Verb: "create", Group: group, Resource: plural, Namespace: teamA}
	eventuallyAccess(t, true, pat)
	patB := pat
	patB.Namespace = teamB
	eventuallyAccess(t, false, patB)

	refused(t, userUpdate(t, asCarol, p, func() { p.Spec.Namespaces = []string{teamA, teamB} }),
		`may not bind ClusterRole "`+crd.Name+`-edit" in namespace "`+teamB+`"`)
	refused(t, userUpdate(t, asCarol, p, func() { p.Spec.APIs = nil }),
		"spec.apis is empty", `needs "bind" on every ClusterRole there; list the APIs in spec.apis instead`)

	// Nothing beyond team-a was gained by anyone.
	eventuallyAccess(t, false, patB, dev("create", "apps", "deployments", teamB),
		testutil.Access{User: carol, Verb: "create", Group: group, Resource: plural, Namespace: teamB})
}

// TestGuardAdmitsOria: oria's own RBAC (config/rbac/role.yaml) passes the
// guard for anything, which oria needs to write the ScopeTemplates and
// ScopeInstances it compiles from RBACPolicies.
func TestGuardAdmitsOria(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	cfg, err := testutil.OriaConfig(ctx, cluster, k8sClient)
	require.NoError(t, err)
	asOria, err := client.New(cfg, client.Options{Scheme: k8sClient.Scheme()})
	require.NoError(t, err)
	name := testutil.UniqueName("guard-oria")
	tmpl := testutil.ScopeTemplate(name, []oriav1alpha1.ClusterRoleTemplate{
		{Name: name, Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}},
		{Name: "cluster-admin"},
	}, testutil.User("nobody-"+name))
	require.NoError(t, asOria.Create(ctx, tmpl))
	si := scopeInstance(name, name)
	require.NoError(t, asOria.Create(ctx, si))
	cleanup(t, tmpl, si)
}

// TestGuardFailsClosed: with oria stopped, no oria object can be written,
// and the API server's message names the guard.
func TestGuardFailsClosed(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("guard-closed"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User("nobody"))
	cleanup(t, tmpl)

	oria.Stop()
	oriaLog += ".restarted"
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			var err error
			oria, err = startOria(ctx)
			require.NoError(t, err)
		}
	})
	err := k8sClient.Create(ctx, tmpl)
	require.Error(t, err, "cluster-admin too is refused while the guard is down")
	assert.Contains(t, err.Error(), `failed calling webhook "escalation-guard.oria.operatorframework.io"`)
	t.Log(err)

	var startErr error
	oria, startErr = startOria(ctx)
	require.NoError(t, startErr)
	restarted = true
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NoError(c, k8sClient.Create(ctx, tmpl))
	}, time.Minute, 200*time.Millisecond)
}

// TestGuardDelegationSample applies the user guide's delegation sample: a
// member of platform-team binds view and edit in team-a through oria, and
// is refused team-b.
func TestGuardDelegationSample(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	applySample(t, "tour-extension.yaml")
	applySample(t, "delegate-platform-team.yaml")
	asPam := impersonate(t, "pam", "platform-team")

	name := testutil.UniqueName("platform")
	tmpl := testutil.ScopeTemplate(name, []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}, {Name: "edit"}},
		rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name})
	si := scopeInstance(name, name, "team-a")
	require.NoError(t, asPam.Create(ctx, tmpl))
	require.NoError(t, asPam.Create(ctx, si))
	cleanup(t, tmpl, si)
	waitScopeInstanceReady(t, si.Name)
	dev := testutil.Access{User: "dev", Groups: []string{name}, Verb: "create", Group: "apps", Resource: "deployments", Namespace: "team-a"}
	eventuallyAccess(t, true, dev)

	refused(t, asPam.Create(ctx, scopeInstance(name+"-b", name, "team-b")),
		`user "pam" may not bind ClusterRole "edit" in namespace "team-b"`)
	dev.Namespace = "team-b"
	eventuallyAccess(t, false, dev)
}
