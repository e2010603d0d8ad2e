package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller/scopeinstance"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/localcluster"
)

// alerts is, for each alert of config/prometheus/alerts.yaml, the label
// sets (besides the rule's own labels) it must fire with.
type alerts map[string][]map[string]string

// TestExampleAlerts runs the user guide's example alerts
// (config/prometheus/alerts.yaml) through promtool's checks (in-process,
// alerts_promql_test.go) against oria's real /metrics, scraped while a
// scenario on the running oria goes from a healthy cluster to bad states
// and back:
//   - a ScopeInstance waiting for its ceiling ServiceAccount while a
//     namespace is labelled into its selector (ServiceAccountNotFound);
//   - a ScopeInstance listing a namespace that does not exist;
//   - a ceiling the admin accepts: a ServiceAccount that holds pods but not
//     secrets (Forbidden), standing across oria's rechecks;
//   - an extension in conflict with someone else's ClusterRole;
//   - an extension with an invalid mode (legacy) and a policy for it;
//   - for a moment, a ValidatingAdmissionPolicy refusing oria's
//     RoleBindings (write errors: an event).
//
// Each scrape becomes 30 minutes of input series (the value held
// for 30 one-minute samples), and the alerts are evaluated 5 minutes into
// each scrape's block: an alert with for: 15m fires when its state stood in
// the scrape before and this one (taken at least a recheck apart), a rate
// covers what changed since the scrape before.
func TestExampleAlerts(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	rules := alertRules(t)
	var scrapes []string
	shot := func() {
		status, body := httpGet(oria.MetricsURL)
		require.Equal(t, 200, status, body)
		scrapes = append(scrapes, body)
	}
	waitHealthy(t)
	shot()
	shot()

	// The bad states.
	pods := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}
	secrets := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}}
	saNS := createNamespace(t, "alerts-sa", nil)
	tmpl := &oriav1alpha1.ScopeTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("alerts")},
		Spec: oriav1alpha1.ScopeTemplateSpec{
			ClusterRoles: []oriav1alpha1.ClusterRoleTemplate{
				{Name: testutil.UniqueName("alerts-pods"), Rules: []rbacv1.PolicyRule{pods}},
				{Name: testutil.UniqueName("alerts-secrets"), Rules: []rbacv1.PolicyRule{secrets}},
			},
			BindingTemplate: oriav1alpha1.BindingTemplate{Subjects: []rbacv1.Subject{testutil.User("alerts-operator")}},
		},
	}
	testutil.Create(t, k8sClient, tmpl)
	// A: its ceiling's rights exist, the ServiceAccount not yet.
	selector := testutil.UniqueName("alerts")
	nA := createNamespace(t, "alerts-a", nil)
	grantCeiling(t, saNS, "late", nA, append(ceilingWrites(), pods, secrets))
	siA := scopeInstance(testutil.UniqueName("alerts-a"), tmpl.Name)
	siA.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{selector: "true"}}
	siA.Spec.ServiceAccount = &oriav1alpha1.ServiceAccountReference{Namespace: saNS, Name: "late"}
	// B: a listed namespace that does not exist.
	nB := testutil.UniqueName("alerts-b")
	siB := scopeInstance(testutil.UniqueName("alerts-b"), tmpl.Name, nB)
	// C: a ceiling that may pass on pods, not secrets.
	nC := createNamespace(t, "alerts-c", nil)
	ceiling(t, saNS, "ceiling", []rbacv1.PolicyRule{pods}, nC)
	siC := scopeInstance(testutil.UniqueName("alerts-c"), tmpl.Name, nC)
	siC.Spec.ServiceAccount = &oriav1alpha1.ServiceAccountReference{Namespace: saNS, Name: "ceiling"}
	// D: an extension whose view role name is taken.
	ext := testutil.ClusterExtension(testutil.UniqueName("alerts-conflict"), oriav1alpha1.RBACModeLegacy)
	crd := testutil.CRD(testutil.UniqueName("alerts")+".example.com", "gadgets", "Gadget", ext.Name)
	foreign := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: names.ExtensionRole(crd.Name, names.RoleView)}}
	// E: an invalid mode, and a policy for that extension.
	invalid := testutil.ClusterExtension(testutil.UniqueName("alerts-invalid"), "legacy")
	crdE := testutil.CRD(testutil.UniqueName("alerts")+".example.com", "widgets", "Widget", invalid.Name)
	policy := &oriav1alpha1.RBACPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("alerts")},
		Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: invalid.Name, Access: oriav1alpha1.AccessView,
			Subjects: []rbacv1.Subject{testutil.User("alerts-viewer")}, Namespaces: []string{nC}},
	}
	for _, o := range []client.Object{siA, siB, siC, foreign, crd, ext, crdE, invalid, policy} {
		testutil.Create(t, k8sClient, o)
	}
	label(t, nA, map[string]string{selector: "true"}) // an event oria must not time while it waits for the ServiceAccount
	instanceReady(t, siA, oriav1alpha1.ReasonServiceAccountNotFound, time.Minute)
	instanceReady(t, siB, oriav1alpha1.ReasonNamespaceNotFound, time.Minute)
	instanceReady(t, siC, oriav1alpha1.ReasonForbidden, time.Minute)
	waitExtensionCondition(t, ext.Name, metav1.ConditionFalse, oriav1alpha1.ReasonConflict)
	waitExtensionCondition(t, invalid.Name, metav1.ConditionFalse, oriav1alpha1.ReasonInvalidMode)
	testutil.EventuallyCondition(t, k8sClient, policy, testutil.Condition{Type: oriav1alpha1.TypeReady, Reason: oriav1alpha1.ReasonInvalidMode})
	refusedWrites(t, tmpl.Name) // an event: the API server refuses oria's own writes, for a while
	shot()
	time.Sleep(scopeinstance.DefaultRecheckInterval + 5*time.Second) // past a recheck: the refused bindings are tried again
	shot()

	// Everything is put right; the ceiling by granting its ServiceAccount
	// secrets (oria retries within its recheck interval).
	testutil.Create(t, k8sClient, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: saNS, Name: "late"}})
	testutil.Create(t, k8sClient, testutil.Namespace(nB, nil))
	grantCeiling(t, saNS, "ceiling", nC, []rbacv1.PolicyRule{secrets})
	require.NoError(t, k8sClient.Delete(ctx, ext))
	testutil.SetRBACMode(t, k8sClient, invalid.Name, oriav1alpha1.RBACModeFineGrained)
	instanceReady(t, siA, oriav1alpha1.ReasonBound, time.Minute)
	instanceReady(t, siB, oriav1alpha1.ReasonBound, time.Minute)
	instanceReady(t, siC, oriav1alpha1.ReasonBound, recheck)
	waitPolicyBound(t, policy.Name)
	testutil.EventuallyGone(t, k8sClient, ext)
	waitHealthy(t)
	shot()
	time.Sleep(2 * time.Second)
	shot()

	latency := "oria_namespace_binding_latency_seconds_count"
	assert.Greater(t, parseScrape(t, scrapes[4])[latency], parseScrape(t, scrapes[3])[latency],
		"the namespace created for B was timed (the p99 alert has something to say)")
	refused := alerts{"OriaWriteErrors": {{"kind": "RoleBinding", "reason": "Invalid"}}}
	bad := alerts{
		"OriaConflict":              {{"kind": "ClusterExtension"}},
		"OriaGrantIncomplete":       {{"kind": "ScopeInstance", "reason": "NamespaceNotFound"}, {"kind": "ScopeInstance", "reason": "ServiceAccountNotFound"}},
		"OriaBindingsBeyondCeiling": {{"kind": "ScopeInstance"}},
		"OriaNotReady":              {{"kind": "RBACPolicy", "reason": "InvalidMode"}},
		"OriaExtensionNotManaged":   {{"reason": "InvalidMode"}},
	}
	// At each scrape from the second on: the healthy cluster; the standing
	// bad states just reached (pending) and writes refused since the scrape
	// before; the bad states past a recheck (firing; no write errors for
	// the accepted ceiling); put right (no alert: the wait for the
	// ServiceAccount is not a slow binding); still right.
	want := []alerts{nil, {}, refused, bad, {}, {}}
	requireAlerts(t, rules, scrapes, want)
}

// refusedWrites makes the API server refuse oria's RoleBindings for a
// while: a ValidatingAdmissionPolicy denies every RoleBinding in a
// namespace that a ScopeInstance of template binds; once oria's refusals
// are counted, the instance is deleted (so the errors stop) and the policy
// goes with the test.
func refusedWrites(t *testing.T, template string) {
	t.Helper()
	ctx := context.Background()
	selector := testutil.UniqueName("alerts-refuse")
	ns := createNamespace(t, "alerts-refused", map[string]string{selector: "true"})
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: selector},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{rbacv1.GroupName}, APIVersions: []string{"v1"}, Resources: []string{"rolebindings"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "refused by TestExampleAlerts"}},
		},
	}
	vapBinding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: selector},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        vap.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{selector: "true"}},
			},
		},
	}
	testutil.Create(t, k8sClient, vap)
	testutil.Create(t, k8sClient, vapBinding)
	probe := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Error(c, k8sClient.Create(ctx, probe.DeepCopy(), client.DryRunAll), "the policy is not in force yet")
	}, time.Minute, testutil.Interval)

	refusedSeries := `oria_write_errors_total{kind="RoleBinding",reason="Invalid"}`
	status, body := httpGet(oria.MetricsURL)
	require.Equal(t, 200, status)
	before := parseScrape(t, body)[refusedSeries]
	si := scopeInstance(testutil.UniqueName("alerts-refused"), template, ns)
	testutil.Create(t, k8sClient, si)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		status, body := httpGet(oria.MetricsURL)
		require.Equal(c, 200, status)
		assert.Greater(c, parseScrape(c, body)[refusedSeries], before, "%s", refusedSeries)
	}, time.Minute, testutil.Interval)
	require.NoError(t, k8sClient.Delete(ctx, si))
	testutil.EventuallyGone(t, k8sClient, si)
	// A reconcile of the instance still in flight may be refused once more:
	// the errors have stopped once the counter stands still for a while.
	last, since := -1.0, time.Now()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		status, body := httpGet(oria.MetricsURL)
		require.Equal(c, 200, status)
		if v := parseScrape(c, body)[refusedSeries]; v != last {
			last, since = v, time.Now()
		}
		assert.Greater(c, time.Since(since), 3*time.Second, "%s still moving", refusedSeries)
	}, time.Minute, 500*time.Millisecond)
}

// ceilingWrites is what a ceiling ServiceAccount needs to write bindings.
func ceilingWrites() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: []string{"get", "create", "update", "patch"}}}
}

// waitHealthy waits until every oria object on the cluster is Ready and no
// ClusterExtension reports a problem (Unmanaged is none): other tests'
// objects count in oria's gauges too.
func waitHealthy(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		notReady := func(kind, name string, conds []metav1.Condition) {
			cond := meta.FindStatusCondition(conds, oriav1alpha1.TypeReady)
			assert.True(c, cond != nil && cond.Status == metav1.ConditionTrue, "%s %s is not Ready: %+v", kind, name, cond)
		}
		var policies oriav1alpha1.RBACPolicyList
		var templates oriav1alpha1.ScopeTemplateList
		var instances oriav1alpha1.ScopeInstanceList
		var exts ocv1.ClusterExtensionList
		require.NoError(c, k8sClient.List(ctx, &policies))
		require.NoError(c, k8sClient.List(ctx, &templates))
		require.NoError(c, k8sClient.List(ctx, &instances))
		require.NoError(c, k8sClient.List(ctx, &exts))
		for _, o := range policies.Items {
			notReady("RBACPolicy", o.Name, o.Status.Conditions)
		}
		for _, o := range templates.Items {
			notReady("ScopeTemplate", o.Name, o.Status.Conditions)
		}
		for _, o := range instances.Items {
			notReady("ScopeInstance", o.Name, o.Status.Conditions)
		}
		for _, o := range exts.Items {
			cond := meta.FindStatusCondition(o.Status.Conditions, oriav1alpha1.TypeRBACManaged)
			assert.True(c, cond != nil && (cond.Status == metav1.ConditionTrue || cond.Reason == oriav1alpha1.ReasonUnmanaged),
				"ClusterExtension %s: %+v", o.Name, cond)
		}
	}, 2*time.Minute, 500*time.Millisecond, "a healthy cluster to start from and end at")
}

// alertRule is what the test reads of a rule.
type alertRule struct {
	Alert       string            `json:"alert"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// alertRules writes the rule groups of config/prometheus/alerts.yaml (a
// PrometheusRule) as a Prometheus rules file and returns its path.
func alertRules(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(localcluster.RepoRoot(), "config", "prometheus", "alerts.yaml"))
	require.NoError(t, err)
	var rule struct {
		Kind string `json:"kind"`
		Spec struct {
			Groups []map[string]any `json:"groups"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(b, &rule))
	require.Equal(t, "PrometheusRule", rule.Kind)
	out, err := yaml.Marshal(map[string]any{"groups": rule.Spec.Groups})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "oria-alerts.yaml")
	require.NoError(t, os.WriteFile(path, out, 0o644))
	return path
}

// rulesOf reads the alerting rules back from the rules file.
func rulesOf(t require.TestingT, path string) []alertRule {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var file struct {
		Groups []struct {
			Rules []alertRule `json:"rules"`
		} `json:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(b, &file))
	var out []alertRule
	for _, g := range file.Groups {
		out = append(out, g.Rules...)
	}
	return out
}
