package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

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
	grantRules(t, user,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list"}},
		rbacv1.PolicyRule{APIGroups: []string{"olm.operatorframework.io"}, Resources: []string{"clusterextensions"}, Verbs: []string{"get", "list"}},
		rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list"}},
		rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles", "rolebindings", "clusterrolebindings"}, Verbs: []string{"get", "list"}},
		rbacv1.PolicyRule{APIGroups: []string{oriav1alpha1.GroupVersion.Group}, Resources: []string{"scopetemplates", "scopeinstances", "rbacpolicies"}, Verbs: []string{"get", "list"}})
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("grab"), []oriav1alpha1.ClusterRoleTemplate{{Name: "admin"}}, testutil.User(user))
	testutil.Create(t, k8sClient, tmpl)
	si := scopeInstance(testutil.UniqueName("grab"), tmpl.Name, ns1)
	si.TypeMeta = metav1.TypeMeta{APIVersion: oriav1alpha1.GroupVersion.String(), Kind: "ScopeInstance"}
	file := writeObjects(t, si)
	require.EventuallyWithT(t, func(c *assert.CollectT) { // the read role reaches the authorizer
		var r cli.PlanReport
		out, stderr, err := execPlugin(pluginBin, "plan", "-f", file, "-o", "json", "--as", user)
		if assert.Equal(c, cli.ExitNo, exitCode(err), "%v: %s", err, stderr) && assert.NoError(c, json.Unmarshal([]byte(out), &r)) {
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
	out, stderr, err := runPlugin(t, "", "plan", "-f", file, "--as", user)
	assert.Equal(t, cli.ExitNo, exitCode(err), "refused: exit code 2 (%v)", err)
	assert.Contains(t, stderr, "Error: 1 of 1 objects REFUSED")
	t.Logf("kubectl oria plan, refused:\n%s", out)
	assert.Contains(t, out, "REFUSED: "+guardDenied)
	gone(t, si)
	assert.Empty(t, instanceBindings(t, si.Name))
}

// exitCode is the exit code of a command that returned err (-1 when it did
// not run).
func exitCode(err error) int {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	return -1
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
