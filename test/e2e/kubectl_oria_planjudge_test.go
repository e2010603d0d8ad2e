package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/cli"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestKubectlOriaPlanAsDelegate (issue 38): a delegated user D (create and
// update on oria's kinds, admin of one namespace, nothing else: D may not
// read oria's kinds, list namespaces, ClusterRoles or bindings) plans a
// template and an instance of it. The plan says what D may not read and
// what that leaves unknown, and still shows the binding in D's namespace
// (read by a get), never "0 to create" in silence. The same instance in a
// namespace D does not administer is refused, and what it would write is
// listed as REFUSED, not counted (issue 42).
func TestKubectlOriaPlanAsDelegate(t *testing.T) {
	testutil.NeedCluster(t)
	user, _ := delegate(t, "plan-d")
	mine, other := createNamespace(t, "plan-d", nil), createNamespace(t, "plan-d-other", nil)
	testutil.Create(t, k8sClient, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user + "-admin", Namespace: mine},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects: []rbacv1.Subject{testutil.User(user)}})
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("plan-d"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User(testutil.UniqueName("dev")))
	tmpl.TypeMeta = metav1.TypeMeta{APIVersion: oriav1alpha1.GroupVersion.String(), Kind: "ScopeTemplate"}
	plan := func(ns string, wantExit int) string {
		si := scopeInstance(testutil.UniqueName("plan-d"), tmpl.Name, ns)
		si.TypeMeta = metav1.TypeMeta{APIVersion: oriav1alpha1.GroupVersion.String(), Kind: "ScopeInstance"}
		file := writeObjects(t, tmpl, si)
		var out string
		require.EventuallyWithT(t, func(c *assert.CollectT) { // D's role reaches the authorizer
			stdout, stderr, err := runPlugin(t, "", "plan", "-f", file, "--as", user)
			assert.Equal(c, wantExit, exitCode(err), "%v: %s%s", err, stdout, stderr)
			out = stdout
		}, testutil.Timeout, testutil.Interval)
		t.Logf("kubectl oria plan --as %s (instance in %s):\n%s", user, ns, out)
		gone(t, si)
		return out
	}
	as := `User "` + user + `"`
	unread := "(as " + as + ", who may not list namespaces, clusterextensions, customresourcedefinitions, scopetemplates, scopeinstances, " +
		"clusterroles, rolebindings, clusterrolebindings: see the notes)"

	out := plan(mine, cli.ExitOK)
	for _, s := range []string{
		"ScopeTemplate " + tmpl.Name + " (create): admitted",
		"Note: " + as + " may not list namespaces: the namespaces below are those the instances name (spec.namespaces)",
		"Note: " + as + " may not list rolebindings: whether each RoleBinding below exists already is unknown",
		"role view (unknown)",
		"\n1 to create, 0 to update, 0 to delete, 0 unchanged " + unread + "\n",
		mine + " ",
	} {
		assert.Contains(t, out, s)
	}
	assert.NotContains(t, out, "do not exist", "D's namespace is read by a get")

	// In a namespace D does not administer: refused, and not counted; D
	// may not get that namespace either, so it is taken to exist.
	out = plan(other, cli.ExitNo)
	for _, s := range []string{
		"may not bind",
		"may neither list namespaces nor get " + other + ": taken to exist",
		"\n0 to create, 0 to update, 0 to delete, 0 unchanged; 1 REFUSED (not written) " + unread + "\n",
		"REFUSED create",
	} {
		assert.Contains(t, out, s)
	}
}

// TestKubectlOriaPlanPendingGate (issue 38): the admin's plan of a gated
// grant that is pending says when its gate fills, with which rules (those
// of the roles it stands for, as oria copies them), and when it empties;
// before the policy exists and once oria made the empty gate.
func TestKubectlOriaPlanPendingGate(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	selected := map[string]string{"plan-gate": testutil.UniqueName("gated")}
	createNamespace(t, "plan-gate", selected)
	createNamespace(t, "plan-gate", selected)
	crd := extensionWithAPI(t, oriav1alpha1.RBACModeFineGrained)
	group, plural, ext := crd.Spec.Group, crd.Spec.Names.Plural, crd.Labels[oriav1alpha1.LabelOLMOwnerName]
	notBefore := wholeSecondsFromNow(time.Hour)
	expiresAt := &metav1.Time{Time: notBefore.Add(time.Hour)}
	p := &oriav1alpha1.RBACPolicy{TypeMeta: metav1.TypeMeta{APIVersion: oriav1alpha1.GroupVersion.String(), Kind: "RBACPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("plan-gate")}, Spec: oriav1alpha1.RBACPolicySpec{
			ExtensionName: ext, Access: oriav1alpha1.AccessView, NamespaceSelector: &metav1.LabelSelector{MatchLabels: selected},
			Subjects: []rbacv1.Subject{testutil.User(testutil.UniqueName("gated-user"))}, APIs: []oriav1alpha1.APIRef{{Group: group, Resource: plural}},
			NotBefore: notBefore, ExpiresAt: expiresAt}}
	file := writeObjects(t, p)
	fills := "which holds no rule until " + binding.Stamp(notBefore) + " (spec.notBefore); oria fills it then with the rules of its " +
		"ScopeTemplate's roles, and empties it at " + binding.Stamp(expiresAt) + " (spec.expiresAt): " +
		`{apiGroups: ["` + group + `"], resources: ["` + plural + `"], verbs: ["get", "list", "watch"]}`

	out := kubectlOria(t, "plan", "-f", file)
	t.Logf("kubectl oria plan, not created:\n%s", out)
	assert.Contains(t, out, "RBACPolicy "+p.Name+" is time-bound and pending")
	assert.Contains(t, out, "to its gate, a ClusterRole of its own, "+fills)
	wide := kubectlOria(t, "plan", "-f", file, "-o", "wide")
	assert.Contains(t, wide, "no rule until "+binding.Stamp(notBefore)+", then {apiGroups: [\""+group+"\"]")

	require.NoError(t, k8sClient.Create(ctx, p.DeepCopy()))
	cleanup(t, p)
	policyKey := &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: p.Name}}
	waitReason(t, policyKey, metav1.ConditionFalse, oriav1alpha1.ReasonPending)
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKeyFromObject(policyKey), policyKey))
	si := &oriav1alpha1.ScopeInstance{}
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKey{Name: policyKey.Status.ScopeInstanceName}, si))
	gate := binding.GateName(si.Name, string(si.UID))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Len(c, gateBindings(c, si.Name)["ClusterRole/"+gate], 2)
	}, testutil.Timeout, testutil.Interval)
	out = kubectlOria(t, "plan", "-f", file)
	t.Logf("kubectl oria plan, pending:\n%s", out)
	assert.Contains(t, out, "to its gate, ClusterRole "+gate+", "+fills)
	assert.Contains(t, out, "\n0 to create, 0 to update, 0 to delete, 5 unchanged\n")
}

// TestKubectlOriaPlanNames (issue 42): plan -o name prints one line per
// object that exists and would change, with its namespace, so that the
// documented `kubectl oria plan -f FILE -o name | xargs -L1 kubectl get`
// fetches each, in its namespace: a policy moved from two namespaces to
// two others deletes same-named RoleBindings in both (four lines, not
// two); the bindings to create do not exist yet, and are only counted.
func TestKubectlOriaPlanNames(t *testing.T) {
	testutil.NeedCluster(t)
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("no kubectl")
	}
	ns := []string{createNamespace(t, "plan-names", nil), createNamespace(t, "plan-names", nil),
		createNamespace(t, "plan-names", nil), createNamespace(t, "plan-names", nil)}
	ext, _ := installExtension(t, "plan-names", oriav1alpha1.RBACModeFineGrained)
	waitExtensionCondition(t, ext, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
	pol := &oriav1alpha1.RBACPolicy{TypeMeta: metav1.TypeMeta{APIVersion: oriav1alpha1.GroupVersion.String(), Kind: "RBACPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("plan-names")},
		Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: ext, Access: oriav1alpha1.AccessView,
			Subjects: []rbacv1.Subject{testutil.User(testutil.UniqueName("dev"))}, Namespaces: ns[:2]}}
	testutil.Create(t, k8sClient, pol.DeepCopy())
	waitPolicyReady(t, pol.Name)
	instance := "rbacpolicy-" + pol.Name
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Len(c, instanceBindings(c, instance), 4)
	}, testutil.Timeout, testutil.Interval)
	moved := pol.DeepCopy()
	moved.Spec.Namespaces = ns[2:]
	file := writeObjects(t, moved)

	out, stderr, err := runPlugin(t, "", "plan", "-f", file, "-o", "name")
	require.NoError(t, err, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	t.Logf("kubectl oria plan -o name:\n%s", out)
	assert.Len(t, lines, 6, "the policy, its instance, 2 RoleBindings in each of 2 namespaces")
	assert.Contains(t, lines, "rbacpolicy.oria.operatorframework.io/"+pol.Name)
	assert.Contains(t, lines, "scopeinstance.oria.operatorframework.io/"+instance)
	for _, b := range instanceBindings(t, instance) {
		nsName, _, _ := strings.Cut(b, " ")
		n, name, _ := strings.Cut(nsName, "/")
		assert.Contains(t, lines, "-n "+n+" rolebinding.rbac.authorization.k8s.io/"+name)
	}
	assert.Contains(t, stderr, "4 to create, not listed: they do not exist yet")

	// The documented pipeline fetches every line's object, in its
	// namespace.
	sh := "kubectl-oria plan -f " + file + " -o name | xargs -L1 kubectl get -o name"
	cmd := exec.Command("sh", "-c", sh)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig,
		"PATH="+filepath.Dir(pluginBin)+string(os.PathListSeparator)+filepath.Dir(kubectl)+string(os.PathListSeparator)+os.Getenv("PATH"))
	got, err := cmd.Output()
	require.NoError(t, err, "%s: %v", sh, err)
	var want []string
	for _, l := range lines {
		want = append(want, l[strings.LastIndex(l, " ")+1:])
	}
	assert.Equal(t, want, strings.Split(strings.TrimSpace(string(got)), "\n"), "%s", sh)
}

// TestKubectlOriaPlanCeiling (issue 42): the bindings an instance writes as
// its ServiceAccount ceiling are dry run as that ServiceAccount: the one in
// a namespace where it may write RoleBindings but does not hold the role's
// permissions (the API server's escalation check) is listed as REFUSED, with
// the API server's reason, and not counted; applied, oria writes the other
// one only (checked by SubjectAccessReview).
func TestKubectlOriaPlanCeiling(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	saNS, held, beyond := createNamespace(t, "plan-ceiling-sa", nil), createNamespace(t, "plan-ceiling", nil), createNamespace(t, "plan-ceiling", nil)
	pods := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}
	ceiling(t, saNS, "sa-x", []rbacv1.PolicyRule{pods}, held)
	// In beyond it may write RoleBindings, but does not hold pods.
	grantCeiling(t, saNS, "sa-x", beyond, []rbacv1.PolicyRule{{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"},
		Verbs: []string{"get", "create", "update", "patch"}}})
	operator, role := testutil.UniqueName("operator"), testutil.UniqueName("operator-role")
	tmpl := &oriav1alpha1.ScopeTemplate{ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("plan-ceiling")}, Spec: oriav1alpha1.ScopeTemplateSpec{
		ClusterRoles:    []oriav1alpha1.ClusterRoleTemplate{{Name: role, Rules: []rbacv1.PolicyRule{pods}}},
		BindingTemplate: oriav1alpha1.BindingTemplate{Subjects: []rbacv1.Subject{testutil.User(operator)}}}}
	require.NoError(t, k8sClient.Create(ctx, tmpl))
	cleanup(t, tmpl)
	// The inline role exists while an instance uses the template.
	user := scopeInstance(testutil.UniqueName("plan-ceiling"), tmpl.Name, saNS)
	require.NoError(t, k8sClient.Create(ctx, user))
	cleanup(t, user)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NoError(c, k8sClient.Get(ctx, client.ObjectKey{Name: role}, &rbacv1.ClusterRole{}))
	}, testutil.Timeout, testutil.Interval)
	si := scopeInstance(testutil.UniqueName("plan-ceiling"), tmpl.Name, held, beyond)
	si.TypeMeta = metav1.TypeMeta{APIVersion: oriav1alpha1.GroupVersion.String(), Kind: "ScopeInstance"}
	si.Spec.ServiceAccount = &oriav1alpha1.ServiceAccountReference{Namespace: saNS, Name: "sa-x"}
	file := writeObjects(t, si)

	out := kubectlOria(t, "plan", "-f", file)
	t.Logf("kubectl oria plan:\n%s", out)
	name := binding.BindingName(si.Name, role)
	for _, s := range []string{
		"ScopeInstance " + si.Name + ": RoleBinding " + beyond + "/" + name + " is written as ServiceAccount " + saNS + "/sa-x (spec.serviceAccount), which may not create it: ",
		"attempting to grant RBAC permissions not currently held",
		"\n1 to create, 0 to update, 0 to delete, 0 unchanged; 1 REFUSED (not written)\n",
	} {
		assert.Contains(t, out, s)
	}
	report := planOf(t, "-f", file)
	var lines []string
	for _, c := range report.Changes {
		lines = append(lines, c.Namespace+" "+c.Action+" "+strings.TrimSpace(map[bool]string{true: "refused"}[c.Refused]))
	}
	assert.ElementsMatch(t, []string{held + " create ", beyond + " create refused"}, lines)

	si.TypeMeta = metav1.TypeMeta{}
	require.NoError(t, k8sClient.Create(ctx, si))
	cleanup(t, si)
	as := func(ns string) testutil.Access {
		return testutil.Access{User: operator, Verb: "list", Resource: "pods", Namespace: ns}
	}
	eventuallyAccess(t, true, as(held))
	eventuallyAccess(t, false, as(beyond))
	assert.Equal(t, []string{held + "/" + name + " " + role + " User " + operator}, instanceBindings(t, si.Name), "what plan said")
}
