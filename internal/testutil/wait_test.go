package testutil

import (
	"testing"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/manager"
)

// TestStatus: the observed generation and conditions are found for every
// kind EventuallyCondition waits on, and a kind without a status
// observedGeneration reports none.
func TestStatus(t *testing.T) {
	conds := []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Bound", ObservedGeneration: 3}}
	for _, tc := range []struct {
		obj      client.Object
		observed *int64
	}{
		{&oriav1alpha1.ScopeInstance{Status: oriav1alpha1.ScopeInstanceStatus{ObservedGeneration: 3, Conditions: conds}}, new(int64(3))},
		{&oriav1alpha1.ScopeTemplate{Status: oriav1alpha1.ScopeTemplateStatus{ObservedGeneration: 3, Conditions: conds}}, new(int64(3))},
		{&oriav1alpha1.RBACPolicy{Status: oriav1alpha1.RBACPolicyStatus{ObservedGeneration: 3, Conditions: conds}}, new(int64(3))},
		{&ocv1.ClusterExtension{Status: ocv1.ClusterExtensionStatus{Conditions: conds}}, nil},
	} {
		observed, got := status(t, tc.obj)
		assert.Equal(t, tc.observed, observed, "%T", tc.obj)
		assert.Equal(t, conds, got, "%T", tc.obj)
	}
}

func TestEventuallyCondition(t *testing.T) {
	scheme, err := manager.Scheme()
	require.NoError(t, err)
	si := &oriav1alpha1.ScopeInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "si", Generation: 2},
		Status: oriav1alpha1.ScopeInstanceStatus{ObservedGeneration: 2, Conditions: []metav1.Condition{{
			Type: oriav1alpha1.TypeReady, Status: metav1.ConditionFalse, Reason: oriav1alpha1.ReasonNamespaceNotFound,
			Message: `namespace "a" does not exist`, ObservedGeneration: 2,
		}}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(si).WithStatusSubresource(si).Build()
	got, cond := EventuallyCondition(t, c, &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "si"}}, Condition{
		Type: oriav1alpha1.TypeReady, Status: metav1.ConditionFalse, Reason: oriav1alpha1.ReasonNamespaceNotFound, Message: []string{`"a"`},
	})
	assert.Equal(t, "si", got.Name)
	assert.Equal(t, oriav1alpha1.ReasonNamespaceNotFound, cond.Reason)
}
