package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/cli"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/testutil"
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
	agreeAs(t, rows, alice, groups, map[string]string{legacy: legacyGroup, fine: fineGroup})

	// Each part alone.
	rows = canRows(alice)
	require.Len(t, rows, 1, "%+v", rows)
	assert.Equal(t, legacy, rows[0].Extension)
	agreeAs(t, rows, alice, []string{"system:authenticated"}, map[string]string{legacy: legacyGroup})
	rows = canRows("--group", devs, "-n", ns)
	require.Len(t, rows, 1, "%+v", rows)
	assert.Equal(t, fine, rows[0].Extension)
	agreeAs(t, rows, "", []string{devs}, map[string]string{fine: fineGroup})

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
// and groups on the widgets of the row's extension (ext → API group).
func agreeAs(t *testing.T, rows []cli.AccessRow, user string, groups []string, apiGroups map[string]string) {
	t.Helper()
	for _, r := range rows {
		a := testutil.Access{User: user, Groups: groups, Group: apiGroups[r.Extension], Resource: "widgets"}
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
	assert.Contains(t, strings.Fields(kubectlOria(t, "access", ext, "--show-system", "-o", "name")), "serviceaccount/kube-system/generic-garbage-collector")
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
	readRole := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: reader}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"olm.operatorframework.io"}, Resources: []string{"clusterextensions"}, ResourceNames: []string{ext}, Verbs: []string{"get"}},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"list"}},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, Verbs: []string{"get"}},
	}}
	testutil.Create(t, k8sClient, readRole)
	testutil.Create(t, k8sClient, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: reader},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader}, Subjects: []rbacv1.Subject{testutil.User(reader)}})
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
	kubectlOria(t, "version") // builds the plugin once
	if bin == "" {
		bin = pluginBin
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// writeObjects writes objs as a YAML file of their own and returns its path.
func writeObjects(t *testing.T, objs ...client.Object) string {
	t.Helper()
	var docs []string
	for _, o := range objs {
		b, err := yaml.Marshal(o)
		require.NoError(t, err)
		docs = append(docs, string(b))
	}
	path := filepath.Join(t.TempDir(), "objects.yaml")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(docs, "---\n")), 0o600))
	return path
}

func planOf(t *testing.T, args ...string) cli.PlanReport {
	t.Helper()
	var report cli.PlanReport
	require.NoError(t, json.Unmarshal([]byte(kubectlOria(t, append([]string{"plan", "-o", "json"}, args...)...)), &report))
	return report
}

// instanceBindings is what the bindings of an instance are:
// "namespace/name role subjects".
func instanceBindings(t require.TestingT, instance string) []string {
	var rbs rbacv1.RoleBindingList
	require.NoError(t, k8sClient.List(context.Background(), &rbs, client.MatchingLabels{oriav1alpha1.LabelScopeInstance: names.LabelValue(instance)}))
	var out []string
	for _, b := range rbs.Items {
		if b.DeletionTimestamp == nil {
			out = append(out, bindingLine(b.Namespace, b.Name, b.RoleRef.Name, subjectLines(b.Subjects)))
		}
	}
	sort.Strings(out)
	return out
}

func bindingLine(ns, name, role string, subjects []string) string {
	return ns + "/" + name + " " + role + " " + strings.Join(subjects, ",")
}

func subjectLines(subj []rbacv1.Subject) []string {
	out := make([]string, len(subj))
	for i, s := range subj {
		out[i] = cli.SubjectString(s)
	}
	return out
}

// predicted applies a plan's RoleBinding changes to before.
func predicted(before []string, report cli.PlanReport) []string {
	state := map[string]string{}
	for _, line := range before {
		key, _, _ := strings.Cut(line, " ")
		state[key] = line
	}
	for _, c := range report.Changes {
		if c.Kind != "RoleBinding" {
			continue
		}
		key := c.Namespace + "/" + c.Name
		if c.Action == cli.ActionDelete {
			delete(state, key)
		} else {
			state[key] = bindingLine(c.Namespace, c.Name, c.Role, c.Subjects)
		}
	}
	var out []string
	for _, line := range state {
		out = append(out, line)
	}
	sort.Strings(out)
	return out
}

// eventuallyBindings waits until the instance's bindings are want.
func eventuallyBindings(t *testing.T, instance string, want []string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, want, instanceBindings(c, instance))
	}, testutil.Timeout, testutil.Interval)
}

// gone asserts that obj does not exist.
func gone(t *testing.T, obj client.Object) {
	t.Helper()
	err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	assert.True(t, apierrors.IsNotFound(err), "%T %s exists (%v)", obj, obj.GetName(), err)
}

// TestKubectlOriaPlan: plan predicts what applying creates and changes (a
// new RBACPolicy, then a change of its namespaces and subjects: applied,
// the bindings are what plan said), shows the template's subjects and
// roles, and a change the guard refuses shows its message and writes
// nothing.
func TestKubectlOriaPlan(t *testing.T) {
	testutil.NeedCluster(t)
	ns1, ns2 := testutil.CreateNamespace(t, k8sClient, "oria-plan", nil), testutil.CreateNamespace(t, k8sClient, "oria-plan", nil)
	ext, group := installExtension(t, "plan", oriav1alpha1.RBACModeFineGrained)
	devs := rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: testutil.UniqueName("devs")}
	pol := &oriav1alpha1.RBACPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: oriav1alpha1.GroupVersion.String(), Kind: "RBACPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("plan")},
		Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: ext, Access: oriav1alpha1.AccessView,
			Subjects: []rbacv1.Subject{devs}, Namespaces: []string{ns1, ns2}},
	}
	instance := "rbacpolicy-" + pol.Name
	waitExtensionCondition(t, ext, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)

	report := planOf(t, "-f", writeObjects(t, pol))
	require.Len(t, report.Objects, 1)
	assert.Equal(t, cli.PlannedObject{Kind: "RBACPolicy", Name: pol.Name, Operation: cli.ActionCreate, Admitted: true}, report.Objects[0])
	require.Len(t, report.Templates, 1)
	assert.Equal(t, []string{"Group " + devs.Name}, report.Templates[0].Subjects)
	view := names.ExtensionRole("widgets."+group, names.RoleView)
	assert.Equal(t, view, report.Templates[0].Roles[0].Name)
	want := predicted(nil, report)
	assert.Len(t, want, 4, "view and crdview in two namespaces: %+v", report.Changes)
	gone(t, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: pol.Name}}) // a dry run writes nothing
	table := kubectlOria(t, "plan", "-f", writeObjects(t, pol))
	t.Logf("kubectl oria plan:\n%s", table)
	assert.Contains(t, table, "RBACPolicy "+pol.Name+" (create): admitted")

	testutil.Create(t, k8sClient, pol.DeepCopy())
	waitPolicyReady(t, pol.Name)
	eventuallyBindings(t, instance, want)
	report = planOf(t, "-f", writeObjects(t, pol))
	assert.Equal(t, cli.ActionUpdate, report.Objects[0].Operation)
	assert.Empty(t, report.Changes, "applied: nothing left to change")

	// A change: out of ns2, and a user more.
	changed := pol.DeepCopy()
	changed.Spec.Namespaces = []string{ns1}
	changed.Spec.Subjects = append(changed.Spec.Subjects, testutil.User(testutil.UniqueName("erin")))
	before := instanceBindings(t, instance)
	report = planOf(t, "-f", writeObjects(t, changed))
	assert.True(t, report.Objects[0].Admitted, "%+v", report.Objects[0])
	want = predicted(before, report)
	assert.Len(t, want, 2, "%+v", report.Changes)
	p := &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: pol.Name}}
	update(t, p, func() { p.Spec = changed.Spec })
	eventuallyBindings(t, instance, want)

	// Refused: a delegate (who may read what plan reads) binds an admin's
	// template of the built-in admin role, for themselves.
	user, _ := delegate(t, "planner")
	reader := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "oria-plan-read-" + user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"olm.operatorframework.io"}, Resources: []string{"clusterextensions"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles", "rolebindings", "clusterrolebindings"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{oriav1alpha1.GroupVersion.Group}, Resources: []string{"scopetemplates", "scopeinstances", "rbacpolicies"}, Verbs: []string{"get", "list"}},
	}}
	testutil.Create(t, k8sClient, reader)
	testutil.Create(t, k8sClient, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: reader.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects: []rbacv1.Subject{testutil.User(user)}})
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("grab"), []oriav1alpha1.ClusterRoleTemplate{{Name: "admin"}}, testutil.User(user))
	testutil.Create(t, k8sClient, tmpl)
	si := scopeInstance(testutil.UniqueName("grab"), tmpl.Name, ns1)
	si.TypeMeta = metav1.TypeMeta{APIVersion: oriav1alpha1.GroupVersion.String(), Kind: "ScopeInstance"}
	file := writeObjects(t, si)
	require.EventuallyWithT(t, func(c *assert.CollectT) { // the read role reaches the authorizer
		var r cli.PlanReport
		out, stderr, err := runPlugin(t, "", "plan", "-f", file, "-o", "json", "--as", user)
		if assert.NoError(c, err, stderr) && assert.NoError(c, json.Unmarshal([]byte(out), &r)) {
			report = r
			assert.Empty(c, report.Notes)
		}
	}, testutil.Timeout, testutil.Interval)
	require.Len(t, report.Objects, 1)
	assert.False(t, report.Objects[0].Admitted, "%+v", report.Objects[0])
	assert.Contains(t, report.Objects[0].Message, guardDenied+`user "`+user+`" may not bind`)
	assert.Equal(t, []string{"User " + user}, report.Templates[0].Subjects)
	assert.Equal(t, "admin", report.Templates[0].Roles[0].Name)
	assert.Equal(t, cli.RoleExisting, report.Templates[0].Roles[0].Source)
	assert.Equal(t, []string{ns1 + "/" + binding.BindingName(si.Name, "admin") + " admin User " + user}, predicted(nil, report),
		"what it would write is shown")
	out, _, err := runPlugin(t, "", "plan", "-f", file, "--as", user)
	require.NoError(t, err)
	t.Logf("kubectl oria plan, refused:\n%s", out)
	assert.Contains(t, out, "REFUSED: "+guardDenied)
	gone(t, si)
	assert.Empty(t, instanceBindings(t, si.Name))
}
