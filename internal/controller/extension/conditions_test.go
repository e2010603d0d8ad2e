package extension_test

import (
	"encoding/json"
	"testing"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller/extension"
	"github.com/operator-framework/oria/internal/testutil"
)

// opconSetCondition updates one of operator-controller's own conditions the
// way operator-controller does: GET, meta.SetStatusCondition, Status().Update
// (with its field manager), retrying on a resourceVersion conflict.
func opconSetCondition(t *testing.T, name string, cond metav1.Condition) {
	t.Helper()
	ce := &ocv1.ClusterExtension{ObjectMeta: metav1.ObjectMeta{Name: name}}
	testutil.UpdateStatus(t, k8sClient, ce, func() {
		cond.ObservedGeneration = ce.Generation
		meta.SetStatusCondition(&ce.Status.Conditions, cond)
	}, client.FieldOwner("operator-controller"))
}

func conditionTypes(t require.TestingT, name string) map[string]string {
	out := map[string]string{}
	for _, c := range getCE(t, name).Status.Conditions {
		out[c.Type] = c.Reason
	}
	return out
}

// TestConditionCoexistence: operator-controller-style status updates and
// oria's condition writes do not erase each other, in either order.
func TestConditionCoexistence(t *testing.T) {
	testutil.NeedCluster(t)
	crd := "foos." + group()
	ce := installed(t, legacy, crd)

	// operator-controller first (oria not running yet).
	opconSetCondition(t, ce.Name, metav1.Condition{Type: ocv1.TypeInstalled, Status: metav1.ConditionTrue, Reason: ocv1.ReasonSucceeded, Message: "installed"})
	opconSetCondition(t, ce.Name, metav1.Condition{Type: ocv1.TypeProgressing, Status: metav1.ConditionTrue, Reason: ocv1.ReasonSucceeded, Message: "done"})

	// Then oria.
	startManager(t, extension.Options{DefaultMode: unmanaged})
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy, "1 API(s)")
	assert.Equal(t, map[string]string{ocv1.TypeInstalled: ocv1.ReasonSucceeded, ocv1.TypeProgressing: ocv1.ReasonSucceeded,
		oriav1alpha1.TypeRBACManaged: oriav1alpha1.ReasonLegacy}, conditionTypes(t, ce.Name))

	// operator-controller again, changing its conditions.
	opconSetCondition(t, ce.Name, metav1.Condition{Type: ocv1.TypeProgressing, Status: metav1.ConditionTrue, Reason: ocv1.ReasonRetrying, Message: "retrying"})
	opconSetCondition(t, ce.Name, metav1.Condition{Type: ocv1.TypeInstalled, Status: metav1.ConditionFalse, Reason: ocv1.ReasonFailed, Message: "failed"})
	assert.Equal(t, map[string]string{ocv1.TypeInstalled: ocv1.ReasonFailed, ocv1.TypeProgressing: ocv1.ReasonRetrying,
		oriav1alpha1.TypeRBACManaged: oriav1alpha1.ReasonLegacy}, conditionTypes(t, ce.Name))

	// oria changes its condition: operator-controller's stay.
	setMode(t, ce.Name, fineGrained)
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
	assert.Equal(t, map[string]string{ocv1.TypeInstalled: ocv1.ReasonFailed, ocv1.TypeProgressing: ocv1.ReasonRetrying,
		oriav1alpha1.TypeRBACManaged: oriav1alpha1.ReasonFineGrained}, conditionTypes(t, ce.Name))

	// operator-controller once more, after oria's change.
	opconSetCondition(t, ce.Name, metav1.Condition{Type: ocv1.TypeInstalled, Status: metav1.ConditionTrue, Reason: ocv1.ReasonSucceeded, Message: "installed"})
	setMode(t, ce.Name, unmanaged)
	waitCondition(t, ce.Name, metav1.ConditionFalse, oriav1alpha1.ReasonUnmanaged)
	assert.Equal(t, map[string]string{ocv1.TypeInstalled: ocv1.ReasonSucceeded, ocv1.TypeProgressing: ocv1.ReasonRetrying,
		oriav1alpha1.TypeRBACManaged: oriav1alpha1.ReasonUnmanaged}, conditionTypes(t, ce.Name))

	// oria's field manager owns its condition and nothing else of the status.
	for _, f := range getCE(t, ce.Name).ManagedFields {
		if f.Manager != oriav1alpha1.FieldOwner {
			continue
		}
		var fields map[string]any
		require.NoError(t, json.Unmarshal(f.FieldsV1.Raw, &fields))
		conds := fields["f:status"].(map[string]any)["f:conditions"].(map[string]any)
		var keys []string
		for k := range conds {
			if k != "." {
				keys = append(keys, k)
			}
		}
		assert.Equal(t, []string{`k:{"type":"RBACManaged"}`}, keys)
		assert.Equal(t, "status", f.Subresource)
	}
}
