package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestOriaMetrics checks oria's own metrics after known scenarios: the
// gauges must agree with the status of the objects on the cluster (other
// tests' objects included), the counters must grow by what the scenario
// wrote.
//   - an extension in Legacy mode whose view role name is held by someone
//     else's ClusterRole: one conflict, counted by oria_conflicts and by
//     oria_objects_by_ready_reason{reason="Conflict"}; gone with the
//     extension;
//   - a ScopeInstance listing a namespace that does not exist:
//     NamespaceNotFound; creating the namespace binds it and observes
//     oria_namespace_binding_latency_seconds.
func TestOriaMetrics(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	before := scrape(t)

	grp := testutil.UniqueName("metrics") + ".example.com"
	ext := testutil.ClusterExtension(testutil.UniqueName("gadgets"), oriav1alpha1.RBACModeLegacy)
	crd := testutil.CRD(grp, "gadgets", "Gadget", ext.Name)
	foreign := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: names.ExtensionRole(crd.Name, names.RoleView)}}
	for _, o := range []client.Object{foreign, crd, ext} {
		testutil.Create(t, k8sClient, o)
	}
	waitExtensionCondition(t, ext.Name, metav1.ConditionFalse, oriav1alpha1.ReasonConflict)
	conflictSeries := `oria_objects_by_ready_reason{kind="ClusterExtension",reason="Conflict",status="False"}`
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		m := scrape(c)
		n := extensionsWithReason(c, oriav1alpha1.ReasonConflict)
		assert.GreaterOrEqual(c, n, 1.0)
		assert.Equal(c, n, m[`oria_conflicts{kind="ClusterExtension"}`])
		assert.Equal(c, n, m[conflictSeries])
		assert.Equal(c, managedClusterRoles(c), m[`oria_managed_objects{kind="ClusterRole"}`])
		// admin, edit and view-crdview were created; view is in conflict.
		created := `oria_writes_total{action="created",kind="ClusterRole"}`
		assert.GreaterOrEqual(c, m[created]-before[created], 3.0)
	}, time.Minute, 200*time.Millisecond)

	// The extension goes: so does its conflict.
	require.NoError(t, k8sClient.Delete(ctx, ext))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		m := scrape(c)
		n := extensionsWithReason(c, oriav1alpha1.ReasonConflict)
		assert.Equal(c, n, m[`oria_conflicts{kind="ClusterExtension"}`])
		assert.Equal(c, n, m[conflictSeries])
		assert.Equal(c, extensionsWithReason(c, oriav1alpha1.ReasonLegacy), m[`oria_objects_by_ready_reason{kind="ClusterExtension",reason="Legacy",status="True"}`])
	}, time.Minute, 200*time.Millisecond)

	// A listed namespace that does not exist yet, then appears.
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("metrics"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User("metrics-user"))
	missing := testutil.UniqueName("later")
	si := &oriav1alpha1.ScopeInstance{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("metrics")},
		Spec:       oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: tmpl.Name, Namespaces: []string{missing}},
	}
	testutil.Create(t, k8sClient, tmpl)
	testutil.Create(t, k8sClient, si)
	notFound := `oria_objects_by_ready_reason{kind="ScopeInstance",reason="NamespaceNotFound",status="False"}`
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n := instancesWithReason(c, oriav1alpha1.ReasonNamespaceNotFound)
		assert.GreaterOrEqual(c, n, 1.0)
		assert.Equal(c, n, scrape(c)[notFound])
	}, time.Minute, 200*time.Millisecond)
	latency := "oria_namespace_binding_latency_seconds_count"
	observed := scrape(t)[latency]
	testutil.Create(t, k8sClient, testutil.Namespace(missing, nil))
	waitScopeInstanceReady(t, si.Name)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		m := scrape(c)
		assert.GreaterOrEqual(c, m[latency]-observed, 1.0, "the new namespace's binding latency was observed")
		assert.Equal(c, instancesWithReason(c, oriav1alpha1.ReasonNamespaceNotFound), m[notFound])
		// Counted from the informer's store, not a list (see storeSize).
		assert.Equal(c, managedRoleBindings(c), m[`oria_managed_objects{kind="RoleBinding"}`])
	}, time.Minute, 200*time.Millisecond)
}

// scrape reads oria's /metrics into series ("name{label="value",...}",
// labels sorted; a histogram as name_count and name_sum) and values.
func scrape(t assert.TestingT) map[string]float64 {
	status, body := httpGet(oria.MetricsURL)
	if !assert.Equal(t, http.StatusOK, status, "scraping %s", oria.MetricsURL) {
		return nil
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(body))
	if !assert.NoError(t, err) {
		return nil
	}
	out := map[string]float64{}
	for name, f := range families {
		if !strings.HasPrefix(name, "oria_") {
			continue
		}
		for _, m := range f.GetMetric() {
			key := series(name, m.GetLabel())
			switch {
			case m.GetHistogram() != nil:
				out[series(name+"_count", m.GetLabel())] = float64(m.GetHistogram().GetSampleCount())
				out[series(name+"_sum", m.GetLabel())] = m.GetHistogram().GetSampleSum()
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

func series(name string, labels []*dto.LabelPair) string {
	if len(labels) == 0 {
		return name
	}
	parts := make([]string, len(labels))
	for i, l := range labels {
		parts[i] = fmt.Sprintf("%s=%q", l.GetName(), l.GetValue())
	}
	slices.Sort(parts)
	return name + "{" + strings.Join(parts, ",") + "}"
}

// extensionsWithReason counts the ClusterExtensions whose RBACManaged
// condition has reason.
func extensionsWithReason(c assert.TestingT, reason string) float64 {
	var list ocv1.ClusterExtensionList
	assert.NoError(c, k8sClient.List(context.Background(), &list))
	return withReason(list.Items, func(ce ocv1.ClusterExtension) []metav1.Condition { return ce.Status.Conditions },
		oriav1alpha1.TypeRBACManaged, reason)
}

// instancesWithReason counts the ScopeInstances whose Ready condition has
// reason.
func instancesWithReason(c assert.TestingT, reason string) float64 {
	var list oriav1alpha1.ScopeInstanceList
	assert.NoError(c, k8sClient.List(context.Background(), &list))
	return withReason(list.Items, func(si oriav1alpha1.ScopeInstance) []metav1.Condition { return si.Status.Conditions },
		oriav1alpha1.TypeReady, reason)
}

// withReason counts the items whose condition of type condType has reason.
func withReason[T any](items []T, conditions func(T) []metav1.Condition, condType, reason string) float64 {
	n := 0.0
	for _, o := range items {
		if cond := meta.FindStatusCondition(conditions(o), condType); cond != nil && cond.Reason == reason {
			n++
		}
	}
	return n
}

func managedClusterRoles(c assert.TestingT) float64 {
	var list rbacv1.ClusterRoleList
	assert.NoError(c, k8sClient.List(context.Background(), &list, client.MatchingLabels{oriav1alpha1.LabelManaged: oriav1alpha1.ManagedValue}))
	return float64(len(list.Items))
}

func managedRoleBindings(c assert.TestingT) float64 {
	var list rbacv1.RoleBindingList
	assert.NoError(c, k8sClient.List(context.Background(), &list, client.MatchingLabels{oriav1alpha1.LabelManaged: oriav1alpha1.ManagedValue}))
	return float64(len(list.Items))
}
