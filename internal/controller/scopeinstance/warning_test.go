package scopeinstance_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// warnings returns the Warning events recorded on the named instance, by
// reason (the events API counts repeats in a series).
func warnings(t require.TestingT, instance string) map[string]int32 {
	var list eventsv1.EventList
	require.NoError(t, k8sClient.List(context.Background(), &list))
	out := map[string]int32{}
	for _, e := range list.Items {
		if e.Regarding.Kind == "ScopeInstance" && e.Regarding.Name == instance && e.Type == corev1.EventTypeWarning {
			n := int32(1)
			if e.Series != nil {
				n = e.Series.Count
			}
			out[e.Reason] += n
		}
	}
	return out
}

// TestWarningOnTransition: `kubectl describe` of an instance that lists a
// missing namespace shows one Warning event saying so, not one per
// reconcile; a second problem is a second event.
func TestWarningOnTransition(t *testing.T) {
	testutil.NeedCluster(t)
	ns := namespace(t, "warn", nil)
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User("alice"))
	create(t, tmpl)
	missing := testutil.UniqueName("missing")
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{ns, missing}, nil)
	create(t, si)
	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonNamespaceNotFound)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, map[string]int32{oriav1alpha1.ReasonNamespaceNotFound: 1}, warnings(c, si.Name))
	}, testutil.Timeout, testutil.Interval)

	// Reconciles of an unchanged problem add nothing.
	update(t, si, func() { si.Labels = map[string]string{"touched": "yes"} })
	time.Sleep(2 * time.Second)
	assert.Equal(t, map[string]int32{oriav1alpha1.ReasonNamespaceNotFound: 1}, warnings(t, si.Name))

	update(t, si, func() { si.Spec.ScopeTemplateName = testutil.UniqueName("no-such-template") })
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, map[string]int32{oriav1alpha1.ReasonNamespaceNotFound: 1, oriav1alpha1.ReasonTemplateNotFound: 1}, warnings(c, si.Name))
	}, testutil.Timeout, testutil.Interval)
}
