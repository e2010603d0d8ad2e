package e2e

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/admission"
	"github.com/operator-framework/oria/internal/testutil"
)

// guardDenied is how the API server starts the message of a refusal by the
// escalation guard.
const guardDenied = `admission webhook "` + admission.WebhookName + `" denied the request: oria: `

// delegate creates a user who may create and update oria's three kinds and
// nothing else (what an admin gives a "platform team" to manage operator
// scoping), and returns their name and a client acting as them.
func delegate(t *testing.T, prefix string) (string, client.Client) {
	t.Helper()
	name := testutil.UniqueName(prefix)
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "oria-delegate-" + name},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{oriav1alpha1.GroupVersion.Group},
			Resources: []string{"scopetemplates", "scopeinstances", "rbacpolicies"},
			Verbs:     []string{"create", "update"},
		}},
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}},
	}
	for _, o := range []client.Object{role, crb} {
		testutil.Create(t, k8sClient, o)
	}
	// The API server's RBAC authorizer reads bindings from its informers, a
	// moment behind the create: the user acts once it sees the binding.
	waitAllowed(t, true, testutil.Access{User: name, Verb: "update", Group: oriav1alpha1.GroupVersion.Group, Resource: "scopetemplates"})
	return name, impersonate(t, name)
}

// impersonate returns a client acting as user (the API server adds
// system:authenticated).
func impersonate(t *testing.T, user string, groups ...string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	c, err := client.New(cfg, client.Options{Scheme: k8sClient.Scheme()})
	require.NoError(t, err)
	return c
}

// refused asserts that err is the guard's refusal and that its message
// contains every part.
func refused(t *testing.T, err error, parts ...string) {
	t.Helper()
	require.Error(t, err, "the guard must refuse")
	assert.True(t, apierrors.IsForbidden(err), "a refusal is 403 Forbidden: %v", err)
	t.Log(err)
	assert.Contains(t, err.Error(), guardDenied)
	for _, p := range parts {
		assert.Contains(t, err.Error(), p)
	}
}

// cleanup deletes objs (as admin) when the test ends.
func cleanup(t *testing.T, objs ...client.Object) {
	t.Cleanup(func() {
		for _, o := range slices.Backward(objs) {
			_ = k8sClient.Delete(context.Background(), o)
		}
	})
}

// userUpdate reads obj as admin, applies change and writes it back as c.
func userUpdate[T client.Object](t *testing.T, c client.Client, obj T, change func()) error {
	t.Helper()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change()
		return c.Update(context.Background(), obj)
	})
}

func scopeInstance(name, template string, namespaces ...string) *oriav1alpha1.ScopeInstance {
	return &oriav1alpha1.ScopeInstance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: template, Namespaces: namespaces},
	}
}

// TestGuardRefusesEscalation is the list of escalations a user with
// only create/update on oria's kinds obtained through oria, each refused at
// admission with a message naming the missing right; SubjectAccessReviews
// confirm the user gained nothing.
func TestGuardRefusesEscalation(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	bob, asBob := delegate(t, "bob")
	other := createNamespace(t, "guard-other", nil)
	all := []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}
	n := func(s string) string { return testutil.UniqueName("guard-" + s) }

	t.Run("inline */*/* role bound cluster-wide to themselves", func(t *testing.T) {
		tmpl := testutil.ScopeTemplate(n("star"), []oriav1alpha1.ClusterRoleTemplate{{GenerateName: "star-", Rules: all}}, testutil.User(bob))
		refused(t, asBob.Create(ctx, tmpl), `may not create ClusterRole "star-`, `needs "escalate" on clusterroles/star-`, "missing: * *.*")
	})
	t.Run("a template referencing cluster-admin, bound cluster-wide", func(t *testing.T) {
		tmpl := testutil.ScopeTemplate(n("ca"), []oriav1alpha1.ClusterRoleTemplate{{Name: "cluster-admin"}}, testutil.User(bob))
		require.NoError(t, asBob.Create(ctx, tmpl), "a template alone binds nothing")
		cleanup(t, tmpl)
		refused(t, asBob.Create(ctx, scopeInstance(n("ca"), tmpl.Name)),
			`user "`+bob+`" may not bind ClusterRole "cluster-admin" cluster-wide: needs "bind" on clusterroles/cluster-admin cluster-wide, or every permission it grants (missing: * *.*`)
	})
	t.Run("admin in a namespace without access", func(t *testing.T) {
		tmpl := testutil.ScopeTemplate(n("admin"), []oriav1alpha1.ClusterRoleTemplate{{Name: "admin"}}, testutil.User(bob))
		require.NoError(t, asBob.Create(ctx, tmpl))
		cleanup(t, tmpl)
		refused(t, asBob.Create(ctx, scopeInstance(n("admin"), tmpl.Name, other)),
			`may not bind ClusterRole "admin" in namespace "`+other+`": needs "bind" on clusterroles/admin there, or every permission it grants (missing: `)
	})
	t.Run("secrets for system:authenticated everywhere", func(t *testing.T) {
		tmpl := testutil.ScopeTemplate(n("secrets"), []oriav1alpha1.ClusterRoleTemplate{{Name: n("secrets"), Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}}}}},
			rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:authenticated"})
		refused(t, asBob.Create(ctx, tmpl), "missing: get secrets, list secrets")
	})
	t.Run("create clusterrolebindings and bind/escalate for themselves", func(t *testing.T) {
		tmpl := testutil.ScopeTemplate(n("rbac"), []oriav1alpha1.ClusterRoleTemplate{{Name: n("rbac"), Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterrolebindings"}, Verbs: []string{"create"}},
			{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, Verbs: []string{"bind", "escalate"}}}}},
			testutil.User(bob))
		refused(t, asBob.Create(ctx, tmpl), "create clusterrolebindings.rbac.authorization.k8s.io", "bind clusterroles.rbac.authorization.k8s.io")
	})
	t.Run("an RBACPolicy granting admin on an extension cluster-wide", func(t *testing.T) {
		crd := extensionWithAPI(t, oriav1alpha1.RBACModeFineGrained)
		p := &oriav1alpha1.RBACPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: n("policy")},
			Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: crd.Labels[oriav1alpha1.LabelOLMOwnerName], Access: oriav1alpha1.AccessAdmin,
				Subjects: []rbacv1.Subject{testutil.User(bob)}},
		}
		refused(t, asBob.Create(ctx, p), `may not bind ClusterRole "`+crd.Name+`-admin" cluster-wide`,
			"spec.apis is empty, which includes APIs a later version of the extension adds")
	})
	t.Run("an instance of an admin's template in a namespace of their choosing", func(t *testing.T) {
		tmpl := testutil.ScopeTemplate(n("admins"), []oriav1alpha1.ClusterRoleTemplate{{Name: "edit"}}, testutil.User(bob))
		require.NoError(t, k8sClient.Create(ctx, tmpl))
		cleanup(t, tmpl)
		refused(t, asBob.Create(ctx, scopeInstance(n("admins"), tmpl.Name, other)), `may not bind ClusterRole "edit" in namespace "`+other+`"`)
	})
	t.Run("an instance of a template that does not exist yet", func(t *testing.T) {
		refused(t, asBob.Create(ctx, scopeInstance(n("early"), n("later"), other)), "which does not exist yet", `needs "bind" on every ClusterRole there`)
	})
	t.Run("an edit adding rules to an admin's template after it was bound", func(t *testing.T) {
		ns := createNamespace(t, "guard-bound", nil)
		tmpl := testutil.ScopeTemplate(n("bound"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User(bob))
		si := scopeInstance(n("bound"), tmpl.Name, ns)
		require.NoError(t, k8sClient.Create(ctx, tmpl))
		require.NoError(t, k8sClient.Create(ctx, si))
		cleanup(t, tmpl, si)
		waitScopeInstanceReady(t, si.Name)
		refused(t, userUpdate(t, asBob, tmpl, func() {
			tmpl.Spec.ClusterRoles = append(tmpl.Spec.ClusterRoles, oriav1alpha1.ClusterRoleTemplate{Name: n("more"), Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}})
		}), "missing: get secrets")
		refused(t, userUpdate(t, asBob, tmpl, func() {
			tmpl.Spec.ClusterRoles = append(tmpl.Spec.ClusterRoles, oriav1alpha1.ClusterRoleTemplate{Name: "admin"})
		}), `may not bind ClusterRole "admin" in namespace "`+ns+`"`)
	})

	// Nothing was gained.
	for _, a := range []testutil.Access{
		{Verb: "*", Group: "*", Resource: "*"},
		{Verb: "get", Resource: "secrets"},
		{Verb: "list", Resource: "secrets", Namespace: other},
		{Verb: "create", Group: rbacv1.GroupName, Resource: "clusterrolebindings"},
		{Verb: "bind", Group: rbacv1.GroupName, Resource: "clusterroles", Name: "cluster-admin"},
		{Verb: "escalate", Group: rbacv1.GroupName, Resource: "clusterroles"},
		{Verb: "create", Resource: "pods", Namespace: other},
	} {
		a.User = bob
		assert.False(t, can(t, a), "%s", a)
		a.User, a.Groups = "someone", []string{"system:authenticated"}
		assert.False(t, can(t, a), "%s", a)
	}
	kubectlCanIAs(t, "no", bob, "*", "*", "")
	kubectlCanIAs(t, "no", bob, "get", "secrets", other)
	kubectlCanIAs(t, "no", bob, "create", "clusterrolebindings", "")
	var rbs rbacv1.RoleBindingList
	require.NoError(t, k8sClient.List(ctx, &rbs, client.InNamespace(other)))
	for _, rb := range rbs.Items {
		assert.NotEqual(t, oriav1alpha1.ManagedValue, rb.Labels[oriav1alpha1.LabelManaged], "oria bound nothing in %s: %s", other, rb.Name)
	}
}

// kubectlCanIAs runs `kubectl auth can-i VERB RESOURCE --as=USER` where
// kubectl is installed (SubjectAccessReviews are the real check).
func kubectlCanIAs(t *testing.T, want, user, verb, resource, ns string) {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Log("kubectl not installed; SubjectAccessReviews cover this check")
		return
	}
	args := []string{"--kubeconfig", cluster.Kubeconfig, "auth", "can-i", verb, resource, "--as=" + user}
	if ns != "" {
		args = append(args, "-n", ns)
	} else {
		args = append(args, "--all-namespaces")
	}
	out, _ := exec.Command(kubectl, args...).CombinedOutput()
	assert.Equal(t, want, strings.TrimSpace(string(out)), "kubectl %s", strings.Join(args[2:], " "))
}
