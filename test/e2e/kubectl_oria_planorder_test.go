package e2e

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/cli"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestKubectlOriaPlanFileOrder (issue 38): plan -f judges a file as kubectl
// apply -f does, in order: a namespace admin's file holding a template and
// an instance of it in their namespace is admitted by plan as by apply
// (plan used to judge the instance without its template and refuse it),
// and the same instance in a namespace they do not administer is refused
// for what it binds, not for a template that does not exist.
func TestKubectlOriaPlanFileOrder(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	user, as := delegate(t, "plan-order")
	mine := createNamespace(t, "plan-mine", nil)
	other := createNamespace(t, "plan-other", nil)
	testutil.Create(t, k8sClient, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user + "-admin", Namespace: mine},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects: []rbacv1.Subject{testutil.User(user)}})
	grantRules(t, user,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list"}},
		rbacv1.PolicyRule{APIGroups: []string{"olm.operatorframework.io"}, Resources: []string{"clusterextensions"}, Verbs: []string{"get", "list"}},
		rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list"}},
		rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles", "rolebindings", "clusterrolebindings"}, Verbs: []string{"get", "list"}},
		rbacv1.PolicyRule{APIGroups: []string{oriav1alpha1.GroupVersion.Group}, Resources: []string{"scopetemplates", "scopeinstances", "rbacpolicies"}, Verbs: []string{"get", "list"}})

	tmpl := testutil.ScopeTemplate(testutil.UniqueName("order"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User(testutil.UniqueName("dev")))
	tmpl.TypeMeta = metav1.TypeMeta{APIVersion: oriav1alpha1.GroupVersion.String(), Kind: "ScopeTemplate"}
	plan := func(tmpl *oriav1alpha1.ScopeTemplate, ns string) cli.PlanReport {
		si := scopeInstance(testutil.UniqueName("order"), tmpl.Name, ns)
		si.TypeMeta = metav1.TypeMeta{APIVersion: oriav1alpha1.GroupVersion.String(), Kind: "ScopeInstance"}
		file := writeObjects(t, tmpl, si)
		var report cli.PlanReport
		require.EventuallyWithT(t, func(c *assert.CollectT) { // the read rules reach the authorizer
			out, stderr, _ := execPlugin(pluginBin, "plan", "-f", file, "-o", "json", "--as", user)
			if assert.NoError(c, json.Unmarshal([]byte(out), &report), stderr) {
				assert.Len(c, report.Objects, 2)
			}
		}, testutil.Timeout, testutil.Interval)
		return report
	}

	report := plan(tmpl, mine)
	for _, o := range report.Objects {
		assert.True(t, o.Admitted, "%+v", o)
	}
	gone(t, tmpl)
	// apply agrees: the template, then the instance, as the delegate.
	si := scopeInstance(testutil.UniqueName("order"), tmpl.Name, mine)
	require.NoError(t, as.Create(ctx, tmpl.DeepCopy()))
	require.NoError(t, as.Create(ctx, si))
	cleanup(t, tmpl, si)

	// The same file, a new template, the instance in a namespace the
	// delegate does not administer: refused for what it binds there.
	other2 := tmpl.DeepCopy()
	other2.Name = testutil.UniqueName("order")
	report = plan(other2, other)
	assert.True(t, report.Objects[0].Admitted, "%+v", report.Objects[0])
	gone(t, other2)
	assert.False(t, report.Objects[1].Admitted, "%+v", report.Objects[1])
	assert.Contains(t, report.Objects[1].Message, `may not bind`)
	assert.NotContains(t, report.Objects[1].Message, "does not exist yet")
}
