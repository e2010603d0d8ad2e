package extension_test

import (
	"testing"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller/extension"
	"github.com/operator-framework/oria/internal/testutil"
)

// reconciles returns how many reconciles the extension controller has run
// in this process (controller-runtime's reconcile counter).
func reconciles(t require.TestingT) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	require.NoError(t, err)
	var n float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == extension.ControllerName {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// TestStatusWritesByOthersDoNotRequeue: operator-controller writes the
// ClusterExtension's status all the time; none of those writes makes oria
// reconcile (and so none makes it write). An annotation change does.
func TestStatusWritesByOthersDoNotRequeue(t *testing.T) {
	testutil.NeedCluster(t)
	startManager(t, extension.Options{DefaultMode: unmanaged})
	crd := "foos." + group()
	ce := installed(t, legacy, crd)
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy)

	// Settle: no reconcile for a second.
	var before float64
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		before = reconciles(c)
		time.Sleep(time.Second)
		assert.Equal(c, before, reconciles(c), "still reconciling")
	}, testutil.Timeout, testutil.Interval)

	// Another writer (operator-controller) updates its own condition.
	cur := &ocv1.ClusterExtension{ObjectMeta: metav1.ObjectMeta{Name: ce.Name}}
	testutil.UpdateStatus(t, k8sClient, cur, func() {
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{
			Type: "Installed", Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "installed", ObservedGeneration: cur.Generation,
		})
	})
	written := getCE(t, ce.Name).ResourceVersion
	time.Sleep(2 * time.Second)
	assert.Equal(t, before, reconciles(t), "a status-only write requeued the extension")
	assert.Equal(t, written, getCE(t, ce.Name).ResourceVersion, "oria wrote the ClusterExtension after a status-only write")

	// Positive control: a mode change is acted on.
	setMode(t, ce.Name, oriav1alpha1.RBACModeFineGrained)
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
	assert.Greater(t, reconciles(t), before)
}
