package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/cli"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/localcluster"
)

// TestKubectlOria runs the kubectl oria plugin, built from ./cmd/kubectl-oria,
// against the local control plane for three extensions:
//   - Legacy: users bound to the built-in view, edit and admin roles in a
//     namespace, and one to view cluster-wide;
//   - FineGrained with two RBACPolicies (a group viewing in one namespace,
//     a user editing in another) and a ScopeInstance of an admin's own
//     template binding the generated view role;
//   - Unmanaged: a user bound to view gets nothing.
//
// status must report each mode, API and role; access must name who may do
// what, where and through what, and every row (and every verb it leaves
// out) must agree with a SubjectAccessReview made here.
func TestKubectlOria(t *testing.T) {
	testutil.NeedCluster(t)
	ns := testutil.CreateNamespace(t, k8sClient, "oria-cli", nil)
	ns2 := testutil.CreateNamespace(t, k8sClient, "oria-cli", nil)

	legacy, legacyGroup := installExtension(t, "legacy", oriav1alpha1.RBACModeLegacy)
	fine, fineGroup := installExtension(t, "fine", oriav1alpha1.RBACModeFineGrained)
	unmanaged, _ := installExtension(t, "plain", oriav1alpha1.RBACModeUnmanaged)

	viewer, editor, admin, clusterViewer := testutil.UniqueName("viewer"), testutil.UniqueName("editor"), testutil.UniqueName("admin"), testutil.UniqueName("cviewer")
	for user, role := range map[string]string{viewer: "view", editor: "edit", admin: "admin"} {
		testutil.Create(t, k8sClient, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{testutil.User(user)},
		})
	}
	testutil.Create(t, k8sClient, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: clusterViewer},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{testutil.User(clusterViewer)},
	})
	devs, carol := testutil.UniqueName("devs"), testutil.UniqueName("carol")
	viewPolicy := policy(t, fine, oriav1alpha1.AccessView, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: devs}, ns)
	editPolicy := policy(t, fine, oriav1alpha1.AccessEdit, testutil.User(carol), ns2)
	// A ScopeInstance of the admin's own template binding the generated view role.
	dave := testutil.UniqueName("dave")
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("readers"), []oriav1alpha1.ClusterRoleTemplate{
		{Name: names.ExtensionRole("widgets."+fineGroup, names.RoleView)}}, testutil.User(dave))
	testutil.Create(t, k8sClient, tmpl)
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("readers")},
		Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: tmpl.Name, Namespaces: []string{ns2}}}
	testutil.Create(t, k8sClient, si)
	start := time.Now()
	waitScopeInstanceReady(t, si.Name)
	waitPolicyReady(t, viewPolicy)
	waitPolicyReady(t, editPolicy)
	t.Logf("policies ready after %v", time.Since(start).Round(time.Millisecond))
	waitExtensionCondition(t, legacy, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy)
	waitExtensionCondition(t, unmanaged, metav1.ConditionFalse, oriav1alpha1.ReasonUnmanaged)
	res := func(group, user, verb, namespace string) testutil.Access {
		return testutil.Access{User: user, Verb: verb, Group: group, Resource: "widgets", Namespace: namespace}
	}
	// Aggregation is asynchronous (kube-controller-manager).
	eventuallyAccess(t, true, res(legacyGroup, viewer, "list", ns), res(legacyGroup, editor, "create", ns),
		res(legacyGroup, admin, "deletecollection", ns), res(legacyGroup, clusterViewer, "list", ""))
	t.Logf("aggregated after %v", time.Since(start).Round(time.Millisecond))

	// status: one table, and the same as JSON.
	table := kubectlOria(t, "status", legacy, fine, unmanaged)
	t.Logf("kubectl oria status:\n%s", table)
	for _, want := range []string{"EXTENSION", legacy, "Legacy", "FineGrained", "Unmanaged", "widgets." + legacyGroup, viewPolicy, editPolicy, "Ready=True Bound"} {
		assert.Contains(t, table, want)
	}
	var status cli.StatusReport
	require.NoError(t, json.Unmarshal([]byte(kubectlOria(t, "status", legacy, fine, unmanaged, "-o", "json")), &status))
	require.Len(t, status.Extensions, 3)
	byName := map[string]cli.ExtensionStatus{}
	for _, e := range status.Extensions {
		byName[e.Name] = e
	}
	assert.Equal(t, "Legacy", byName[legacy].Mode)
	assert.Equal(t, []cli.API{{CRD: "widgets." + legacyGroup, Group: legacyGroup, Resource: "widgets", Kind: "Widget", Scope: cli.ScopeNamespaced}}, byName[legacy].APIs)
	assert.Len(t, byName[legacy].Roles, 4)
	for _, r := range byName[legacy].Roles {
		assert.Equal(t, cli.SourceGenerated, r.Source, r.Name)
		assert.NotEmpty(t, r.AggregatesTo, r.Name)
	}
	assert.Equal(t, "FineGrained", byName[fine].Mode)
	var grants []string
	for _, g := range byName[fine].Grants {
		grants = append(grants, fmt.Sprintf("%s %s %s %s/%s", g.Kind, g.Name, g.Access, g.Ready, g.Reason))
	}
	assert.ElementsMatch(t, []string{
		"RBACPolicy " + viewPolicy + " view True/Bound", "ScopeInstance rbacpolicy-" + viewPolicy + " view True/Bound",
		"RBACPolicy " + editPolicy + " edit True/Bound", "ScopeInstance rbacpolicy-" + editPolicy + " edit True/Bound",
		"ScopeInstance " + si.Name + " view True/Bound",
	}, grants)
	assert.Equal(t, "Unmanaged", byName[unmanaged].Mode)
	assert.Empty(t, byName[unmanaged].Roles)

	// access, Legacy: the users of the built-in roles, through aggregation.
	rows := accessRows(t, legacy)
	aggregation := "Legacy aggregation: "
	assertRow(t, rows, "User "+viewer, ns, cli.LevelView, aggregation+"RoleBinding "+ns+"/"+viewer+" -> view")
	assertRow(t, rows, "User "+editor, ns, cli.LevelEdit, aggregation+"RoleBinding "+ns+"/"+editor+" -> edit")
	assertRow(t, rows, "User "+admin, ns, cli.LevelAdmin, aggregation+"RoleBinding "+ns+"/"+admin+" -> admin")
	assertRow(t, rows, "User "+clusterViewer, cli.AllNamespaces, cli.LevelView, aggregation+"ClusterRoleBinding "+clusterViewer+" -> view")
	agreeWithAuthorizer(t, rows, legacyGroup)
	table = kubectlOria(t, "access", legacy)
	t.Logf("kubectl oria access:\n%s", table)
	assert.Contains(t, table, "User "+viewer)

	// -n: only that namespace (cluster-wide grants asked about it).
	inNS := accessRows(t, legacy, "-n", ns2)
	for _, r := range inNS {
		assert.Equal(t, ns2, r.Namespace, "%+v", r)
	}
	assertRow(t, inNS, "User "+clusterViewer, ns2, cli.LevelView, aggregation+"ClusterRoleBinding "+clusterViewer+" -> view")
	agreeWithAuthorizer(t, inNS, legacyGroup)

	// access, FineGrained: the two policies, nothing for the Legacy users.
	rows = accessRows(t, fine)
	assertRow(t, rows, "Group "+devs, ns, cli.LevelView, "RBACPolicy "+viewPolicy)
	assertRow(t, rows, "User "+carol, ns2, cli.LevelEdit, "RBACPolicy "+editPolicy)
	assertRow(t, rows, "User "+dave, ns2, cli.LevelView, "ScopeInstance "+si.Name)
	agreeWithAuthorizer(t, rows, fineGroup)
	for _, r := range rows {
		assert.NotContains(t, []string{"User " + viewer, "User " + editor, "User " + admin, "User " + clusterViewer}, r.Subject)
	}

	// access, Unmanaged: nobody but who holds everything (cluster-admin).
	rows = accessRows(t, unmanaged)
	for _, r := range rows {
		assert.Equal(t, cli.AllNamespaces, r.Namespace, "%+v", r)
		assert.NotContains(t, strings.Join(r.Via, ";"), "aggregation", "%+v", r)
	}
	assertRow(t, rows, "Group system:masters", cli.AllNamespaces, cli.LevelAdmin, "ClusterRoleBinding cluster-admin -> ClusterRole cluster-admin")
}

// installExtension creates a ClusterExtension in mode with one namespaced
// CRD (widgets.<unique group>) and returns its name and API group.
func installExtension(t *testing.T, prefix string, mode oriav1alpha1.RBACMode) (string, string) {
	t.Helper()
	group := testutil.UniqueName(prefix) + ".example.com"
	ext := testutil.ClusterExtension(testutil.UniqueName(prefix), mode)
	testutil.Create(t, k8sClient, ext)
	testutil.Create(t, k8sClient, testutil.CRD(group, "widgets", "Widget", ext.Name))
	return ext.Name, group
}

// policy creates an RBACPolicy granting access to subject in namespace.
func policy(t *testing.T, ext string, access oriav1alpha1.Access, subject rbacv1.Subject, namespace string) string {
	t.Helper()
	p := &oriav1alpha1.RBACPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName(string(access))},
		Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: ext, Access: access,
			Subjects: []rbacv1.Subject{subject}, Namespaces: []string{namespace}},
	}
	testutil.Create(t, k8sClient, p)
	return p.Name
}

// pluginVersion is the version the suite's plugin is stamped with.
const pluginVersion = "v0.0.0-e2e"

var (
	pluginOnce sync.Once
	pluginBin  string
	pluginErr  error
)

// kubectlOria runs `kubectl oria args...` with the plugin built from
// ./cmd/kubectl-oria first on PATH and returns its output.
func kubectlOria(t *testing.T, args ...string) string {
	t.Helper()
	pluginOnce.Do(func() {
		// A folder of its own (it goes on PATH), in the suite's work
		// folder, which the teardown removes.
		dir := filepath.Join(workDir, "plugin")
		if pluginErr = os.Mkdir(dir, 0o700); pluginErr != nil {
			return
		}
		pluginBin = filepath.Join(dir, "kubectl-oria")
		// Stamped with a version, as make build does: kubectl oria check
		// compares it with the server's.
		cmd := exec.Command("go", "build", "-ldflags", "-X github.com/operator-framework/oria/internal/cli.Version="+pluginVersion, "-o", pluginBin, "./cmd/kubectl-oria")
		cmd.Dir = localcluster.RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			pluginErr = fmt.Errorf("building kubectl-oria: %w\n%s", err, out)
		}
	})
	require.NoError(t, pluginErr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// As a user runs it: kubectl finds kubectl-oria on PATH. Without
	// kubectl, the plugin binary is run directly, as kubectl would.
	cmd := exec.CommandContext(ctx, pluginBin, args...)
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		cmd = exec.CommandContext(ctx, kubectl, append([]string{"oria"}, args...)...)
	}
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig,
		"PATH="+filepath.Dir(pluginBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	t.Logf("kubectl oria %s: %v", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	require.NoError(t, err, "kubectl oria %s: %s", strings.Join(args, " "), stderr.String())
	return string(out)
}

func accessRows(t *testing.T, ext string, args ...string) []cli.AccessRow {
	t.Helper()
	var report cli.AccessReport
	require.NoError(t, json.Unmarshal([]byte(kubectlOria(t, append([]string{"access", ext, "-o", "json"}, args...)...)), &report))
	assert.Equal(t, ext, report.Extension)
	return report.Access
}

func assertRow(t *testing.T, rows []cli.AccessRow, subject, namespace, level, via string) {
	t.Helper()
	for _, r := range rows {
		if r.Subject == subject && r.Namespace == namespace {
			assert.Equal(t, level, r.Level, "%+v", r)
			assert.Contains(t, r.Via, via, "%+v", r)
			return
		}
	}
	t.Errorf("no access row for %s in %s; rows: %+v", subject, namespace, rows)
}

// agreeWithAuthorizer asks, for every row, whether each verb of the level
// scale is allowed on the resource (widgets unless given) of group, and
// checks that exactly the row's verbs are.
func agreeWithAuthorizer(t *testing.T, rows []cli.AccessRow, group string, resource ...string) {
	t.Helper()
	verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	for _, r := range rows {
		kind, name, _ := strings.Cut(r.Subject, " ")
		a := testutil.Access{Group: group, Resource: "widgets"}
		if len(resource) > 0 {
			a.Resource = resource[0]
		}
		if r.Namespace != cli.AllNamespaces {
			a.Namespace = r.Namespace
		}
		switch kind {
		case rbacv1.UserKind:
			a.User = name
		case rbacv1.GroupKind:
			a.Groups = []string{name}
		case rbacv1.ServiceAccountKind:
			saNS, saName, _ := strings.Cut(name, "/")
			a.User = "system:serviceaccount:" + saNS + ":" + saName
			a.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + saNS}
		}
		var allowed []string
		for _, v := range verbs {
			a.Verb = v
			if can(t, a) {
				allowed = append(allowed, v)
			}
		}
		assert.Equal(t, allowed, r.Verbs, "row %+v", r)
	}
}

// TestKubectlOriaTour runs the plugin commands of the README tour after
// the tour's steps: argocd in FineGrained mode with the view policy for
// developers in team-a, and bob's RoleBinding to view from the Legacy step,
// which no longer reaches argocd's API.
func TestKubectlOriaTour(t *testing.T) {
	testutil.NeedCluster(t)
	applySample(t, "tour-extension.yaml")
	testutil.Create(t, k8sClient, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bob-view", Namespace: "team-a"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{testutil.User("bob")},
	})
	testutil.SetRBACMode(t, k8sClient, "argocd", oriav1alpha1.RBACModeFineGrained)
	applySample(t, "rbacpolicy-view-team-a.yaml")
	waitPolicyReady(t, "argocd-developers-view")

	table := kubectlOria(t, "status", "argocd")
	t.Logf("kubectl oria status argocd:\n%s", table)
	assert.Contains(t, table, "FineGrained")
	assert.Contains(t, table, "argocd-developers-view")

	rows := accessRows(t, "argocd", "-n", "team-a")
	assertRow(t, rows, "Group developers", "team-a", cli.LevelView, "RBACPolicy argocd-developers-view")
	for _, r := range rows {
		assert.NotEqual(t, "User bob", r.Subject, "bob's view binding grants nothing on argocd in FineGrained mode")
	}
	agreeWithAuthorizer(t, rows, "argoproj.io", "applications")
	t.Logf("kubectl oria access argocd -n team-a:\n%s", kubectlOria(t, "access", "argocd", "-n", "team-a"))
}
