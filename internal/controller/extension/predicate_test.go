package extension_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller/extension"
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
	startManager(t, extension.Options{DefaultMode: unmanaged})
	ctx := context.Background()
	crd := "foos." + group()
	ce := installed(t, legacy, crd)
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy)

	// Settle: no reconcile for a second.
	var before float64
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		before = reconciles(c)
		time.Sleep(time.Second)
		assert.Equal(c, before, reconciles(c), "still reconciling")
	}, timeout, interval)

	// Another writer (operator-controller) updates its own condition.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := getCE(t, ce.Name)
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{
			Type: "Installed", Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "installed", ObservedGeneration: cur.Generation,
		})
		return k8sClient.Status().Update(ctx, cur)
	}))
	written := getCE(t, ce.Name).ResourceVersion
	time.Sleep(2 * time.Second)
	assert.Equal(t, before, reconciles(t), "a status-only write requeued the extension")
	assert.Equal(t, written, getCE(t, ce.Name).ResourceVersion, "oria wrote the ClusterExtension after a status-only write")

	// Positive control: a mode change is acted on.
	setMode(t, ce.Name, string(oriav1alpha1.RBACModeFineGrained))
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
	assert.Greater(t, reconciles(t), before)
}
