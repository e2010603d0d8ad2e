package e2e

import (
	"context"
	"encoding/json"
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

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/cli"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/localcluster"
)

// TestKubectlOriaCan: `kubectl oria can` lists, for a user and a group,
// what they hold across a Legacy and a FineGrained extension (the user
// through a RoleBinding to the built-in edit role, the group through an
// RBACPolicy), and every row agrees with SubjectAccessReviews for the
// whole identity; the user alone, or the group alone, hold only their part.
func TestKubectlOriaCan(t *testing.T) {
	testutil.NeedCluster(t)
	ns := testutil.CreateNamespace(t, k8sClient, "oria-can", nil)
	legacy, legacyGroup := installExtension(t, "canlegacy", oriav1alpha1.RBACModeLegacy)
	fine, fineGroup := installExtension(t, "canfine", oriav1alpha1.RBACModeFineGrained)
	alice, devs := testutil.UniqueName("alice"), testutil.UniqueName("devs")
	testutil.Create(t, k8sClient, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: alice, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{testutil.User(alice)},
	})
	viewPolicy := policy(t, fine, oriav1alpha1.AccessView, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: devs}, ns)
	waitPolicyReady(t, viewPolicy)
	eventuallyAccess(t, true,
		testutil.Access{User: alice, Verb: "create", Group: legacyGroup, Resource: "widgets", Namespace: ns},
		testutil.Access{Groups: []string{devs}, Verb: "list", Group: fineGroup, Resource: "widgets", Namespace: ns})

	canRows := func(args ...string) []cli.AccessRow {
		t.Helper()
		var report cli.CanReport
		args = append([]string{"can", "--extension", legacy, "--extension", fine, "-o", "json"}, args...)
		require.NoError(t, json.Unmarshal([]byte(kubectlOria(t, args...)), &report))
		return report.Access
	}
	rows := canRows(alice, "--group", devs)
	require.Len(t, rows, 2, "%+v", rows)
	byExt := map[string]cli.AccessRow{rows[0].Extension: rows[0], rows[1].Extension: rows[1]}
	assert.Equal(t, ns, byExt[legacy].Namespace)
	assert.Equal(t, cli.LevelEdit, byExt[legacy].Level)
	assert.Contains(t, byExt[legacy].Via, "Legacy aggregation: RoleBinding "+ns+"/"+alice+" -> edit (User "+alice+")")
	assert.Equal(t, []string{"RoleBinding " + ns + "/" + alice}, byExt[legacy].Bindings)
	assert.Equal(t, ns, byExt[fine].Namespace)
	assert.Equal(t, cli.LevelView, byExt[fine].Level)
	assert.Contains(t, byExt[fine].Via, "RBACPolicy "+viewPolicy+" (Group "+devs+")")
	groups := []string{devs, "system:authenticated"}
	agreeAs(t, rows, alice, groups)

	// Each part alone.
	rows = canRows(alice)
	require.Len(t, rows, 1, "%+v", rows)
	assert.Equal(t, legacy, rows[0].Extension)
	agreeAs(t, rows, alice, []string{"system:authenticated"})
	rows = canRows("--group", devs, "-n", ns)
	require.Len(t, rows, 1, "%+v", rows)
	assert.Equal(t, fine, rows[0].Extension)
	agreeAs(t, rows, "", []string{devs})

	// The table, -o wide and -o name.
	table := kubectlOria(t, "can", alice, "--group", devs, "--extension", legacy, "--extension", fine, "-o", "wide")
	t.Logf("kubectl oria can -o wide:\n%s", table)
	for _, want := range []string{"EXTENSION", "VERBS", "BINDINGS", "RoleBinding " + ns + "/" + alice, "get,list,watch"} {
		assert.Contains(t, table, want)
	}
	assert.ElementsMatch(t, []string{"clusterextension.olm.operatorframework.io/" + legacy, "clusterextension.olm.operatorframework.io/" + fine},
		strings.Fields(kubectlOria(t, "can", alice, "--group", devs, "--extension", legacy, "--extension", fine, "-o", "name")))
}

// agreeAs checks every row's verbs against SubjectAccessReviews for user
// and groups on the row's API.
func agreeAs(t *testing.T, rows []cli.AccessRow, user string, groups []string) {
	t.Helper()
	for _, r := range rows {
		resource, group := names.SplitCRDName(r.API)
		a := testutil.Access{User: user, Groups: groups, Group: group, Resource: resource}
		if r.Namespace != cli.AllNamespaces {
			a.Namespace = r.Namespace
		}
		var allowed []string
		for _, v := range []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"} {
			a.Verb = v
			if can(t, a) {
				allowed = append(allowed, v)
			}
		}
		assert.Equal(t, allowed, r.Verbs, "row %+v", r)
	}
}

// TestKubectlOriaTourMore runs the README tour's can and plan lines after
// the tour's steps: argocd in FineGrained mode with the view policy for
// developers in team-a.
func TestKubectlOriaTourMore(t *testing.T) {
	testutil.NeedCluster(t)
	applySample(t, "tour-extension.yaml")
	testutil.SetRBACMode(t, k8sClient, "argocd", oriav1alpha1.RBACModeFineGrained)
	applySample(t, "rbacpolicy-view-team-a.yaml")
	waitPolicyReady(t, "argocd-developers-view")

	var report cli.CanReport
	require.NoError(t, json.Unmarshal([]byte(kubectlOria(t, "can", "alice", "--group", "developers", "--extension", "argocd", "-o", "json")), &report))
	require.NotEmpty(t, report.Access)
	for _, r := range report.Access {
		assert.Equal(t, "team-a", r.Namespace, "%+v", r)
		assert.Equal(t, cli.LevelView, r.Level, "%+v", r)
		assert.Equal(t, []string{"RBACPolicy argocd-developers-view (Group developers)"}, r.Via, "%+v", r)
	}
	agreeAs(t, report.Access, "alice", report.Groups)
	t.Logf("kubectl oria can alice --group developers:\n%s", kubectlOria(t, "can", "alice", "--group", "developers"))

	file := filepath.Join(localcluster.RepoRoot(), "config", "samples", "rbacpolicy-edit-team-a.yaml")
	plan := planOf(t, "-f", file)
	assert.Equal(t, []cli.PlannedObject{{Kind: "RBACPolicy", Name: "argocd-developers-edit", Operation: cli.ActionCreate, Admitted: true}}, plan.Objects)
	for _, c := range plan.Changes {
		assert.Equal(t, cli.ActionCreate, c.Action, "%+v", c)
		assert.Contains(t, []string{"", "team-a"}, c.Namespace, "%+v", c)
	}
	assert.NotEmpty(t, predicted(nil, plan))
	gone(t, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: "argocd-developers-edit"}})
	t.Logf("kubectl oria plan -f %s:\n%s", file, kubectlOria(t, "plan", "-f", file))
}

// TestKubectlOriaSystemAndConventions: access leaves Kubernetes' own
// controllers out unless --show-system, and then labels the garbage
// collector by the verbs it holds; -o name, -n of a missing namespace,
// version, completion as kubectl_complete-oria, and status for a user who
// may get one extension but list none.
func TestKubectlOriaSystemAndConventions(t *testing.T) {
	testutil.NeedCluster(t)
	ext, group := installExtension(t, "conv", oriav1alpha1.RBACModeLegacy)
	waitExtensionCondition(t, ext, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy)

	for _, r := range accessRows(t, ext) {
		assert.NotContains(t, r.Subject, "kube-system/", "%+v", r)
		assert.NotEqual(t, "User system:kube-controller-manager", r.Subject, "%+v", r)
	}
	all := accessRows(t, ext, "--show-system")
	gc := "ServiceAccount kube-system/generic-garbage-collector"
	assertRow(t, all, gc, cli.AllNamespaces, cli.LevelPartial, "ClusterRoleBinding system:controller:generic-garbage-collector -> ClusterRole system:controller:generic-garbage-collector")
	for _, r := range all {
		if r.Subject == gc {
			assert.Equal(t, cli.LevelView, r.Base)
			assert.Equal(t, "view+update,patch,delete", cli.Describe(r))
		}
	}
	agreeWithAuthorizer(t, all, group)
	// -o name: the bindings behind the rows, as kubectl get takes them.
	assert.Contains(t, strings.Fields(kubectlOria(t, "access", ext, "--show-system", "-o", "name")),
		"clusterrolebinding.rbac.authorization.k8s.io/system:controller:generic-garbage-collector")
	assert.Contains(t, strings.Fields(kubectlOria(t, "status", ext, "-o", "name")), "clusterextension.olm.operatorframework.io/"+ext)

	_, stderr, err := runPlugin(t, "", "access", ext, "-n", "no-such-namespace")
	require.NoError(t, err)
	assert.Contains(t, stderr, `Warning: namespace "no-such-namespace" does not exist`)

	var v cli.VersionInfo
	require.NoError(t, json.Unmarshal([]byte(kubectlOria(t, "version", "-o", "json")), &v))
	assert.NotEmpty(t, v.Version)
	assert.NotEmpty(t, v.GoVersion)

	// kubectl runs kubectl_complete-oria ARGS... to complete `kubectl oria ARGS...`.
	completer := filepath.Join(filepath.Dir(pluginBin), cli.CompletionExecutable)
	if _, err := os.Lstat(completer); err != nil {
		require.NoError(t, os.Symlink(pluginBin, completer))
	}
	out, _, err := runPlugin(t, completer, "access", ext[:len(ext)-2])
	require.NoError(t, err)
	assert.Contains(t, strings.Fields(out), ext, "completion of extension names:\n%s", out)

	// A user who may get this extension (and read CRDs and ClusterRoles by
	// name) but list no ClusterExtension, RBACPolicy or ScopeInstance.
	reader := testutil.UniqueName("reader")
	grantRules(t, reader,
		rbacv1.PolicyRule{APIGroups: []string{"olm.operatorframework.io"}, Resources: []string{"clusterextensions"}, ResourceNames: []string{ext}, Verbs: []string{"get"}},
		rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"list"}},
		rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, Verbs: []string{"get"}})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		out, stderr, err := runPlugin(t, "", "status", ext, "-o", "json", "--as", reader)
		if !assert.NoError(c, err, stderr) {
			return
		}
		var status cli.StatusReport
		require.NoError(c, json.Unmarshal([]byte(out), &status))
		if assert.Len(c, status.Extensions, 1) {
			assert.Equal(c, "Legacy", status.Extensions[0].Mode)
			assert.Len(c, status.Extensions[0].Roles, 4)
		}
		assert.Contains(c, stderr, "Warning: you may not list RBACPolicies")
	}, testutil.Timeout, testutil.Interval)
}

// runPlugin runs the plugin binary (bin, the built kubectl-oria when "")
// directly with the suite's kubeconfig and returns stdout and stderr.
func runPlugin(t *testing.T, bin string, args ...string) (string, string, error) {
	t.Helper()
	kubectlOria(t, "version", "--client") // builds the plugin once
	if bin == "" {
		bin = pluginBin
	}
	return execPlugin(bin, args...)
}

// execPlugin runs bin (the plugin, built) with the suite's kubeconfig and
// returns stdout and stderr.
func execPlugin(bin string, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// grantRules gives user the rules cluster-wide, until the test ends.
func grantRules(t *testing.T, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	name := testutil.UniqueName("oria-cli-" + user)
	testutil.Create(t, k8sClient, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules})
	testutil.Create(t, k8sClient, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}, Subjects: []rbacv1.Subject{testutil.User(user)}})
}

// TestKubectlOriaStatusMissingExtension: an RBACPolicy naming an extension
// that is not installed appears in `kubectl oria status` (under that name,
// not installed), with nothing bound, and `status NAME` finds it.
func TestKubectlOriaStatusMissingExtension(t *testing.T) {
	testutil.NeedCluster(t)
	ns := testutil.CreateNamespace(t, k8sClient, "oria-missing", nil)
	missing := testutil.UniqueName("not-installed")
	name := policy(t, missing, oriav1alpha1.AccessView, testutil.User(testutil.UniqueName("erin")), ns)
	testutil.EventuallyCondition(t, k8sClient, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}},
		testutil.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionFalse, Reason: oriav1alpha1.ReasonExtensionNotFound})
	for _, args := range [][]string{{"status"}, {"status", missing}} {
		var report cli.StatusReport
		require.NoError(t, json.Unmarshal([]byte(kubectlOria(t, append(args, "-o", "json")...)), &report))
		var found *cli.ExtensionStatus
		for i := range report.Extensions {
			if report.Extensions[i].Name == missing {
				found = &report.Extensions[i]
			}
		}
		if assert.NotNil(t, found, "kubectl oria %v: no %s", args, missing) && assert.Len(t, found.Grants, 1) {
			assert.True(t, found.NotFound)
			assert.Equal(t, []cli.Grant{{Kind: "RBACPolicy", Name: name, Access: "view", Where: cli.NothingBound, Ready: "False",
				Reason: oriav1alpha1.ReasonExtensionNotFound, Message: found.Grants[0].Message, Subjects: found.Grants[0].Subjects}}, found.Grants)
		}
	}
	table := kubectlOria(t, "status", missing)
	t.Logf("kubectl oria status %s:\n%s", missing, table)
	assert.Contains(t, table, "not installed")
	assert.Contains(t, table, "view (nothing bound)")
}
