package rbacpolicy_test

import (
	"context"
	"slices"
	"testing"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// warningsOn returns the Warning events recorded on the named objects of a
// kind, as "name/reason" (counting repeats in a series).
func warningsOn(t require.TestingT, kind string, names ...string) []string {
	var list eventsv1.EventList
	require.NoError(t, k8sClient.List(context.Background(), &list))
	var out []string
	for _, e := range list.Items {
		if e.Type != corev1.EventTypeWarning || e.Regarding.Kind != kind || !slices.Contains(names, e.Regarding.Name) {
			continue
		}
		n := int32(1)
		if e.Series != nil {
			n = e.Series.Count
		}
		for range n {
			out = append(out, e.Regarding.Name+"/"+e.Reason)
		}
	}
	slices.Sort(out)
	return out
}

// TestInvalidModeReportedOnce: a typo in the mode annotation of an
// extension with several policies, one of them expired, is one mistake,
// warned about once, on the extension. The active policies keep their
// grant and say Bound, naming the annotation; the expired one stays
// Expired; no policy records a Warning. Fixing the annotation makes no
// Warning either.
func TestInvalidModeReportedOnce(t *testing.T) {
	testutil.NeedCluster(t)
	ext, _ := installed(t, oriav1alpha1.RBACModeFineGrained, "typo", "boxes")
	var active []string
	for range 3 {
		p := newPolicy(t, ext.Name, oriav1alpha1.AccessView)
		markInstance(t, p.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound, "bound", "team-a")
		waitReady(t, p.Name, oriav1alpha1.ReasonBound)
		active = append(active, p.Name)
	}
	old := newPolicy(t, ext.Name, oriav1alpha1.AccessView, func(s *oriav1alpha1.RBACPolicySpec) {
		s.ExpiresAt = &metav1.Time{Time: time.Now().Add(-time.Hour).Truncate(time.Second)}
	})
	markInstance(t, old.Name, metav1.ConditionFalse, oriav1alpha1.ReasonExpired, "the grant ended")
	waitReady(t, old.Name, oriav1alpha1.ReasonExpired)
	policies := append(slices.Clone(active), old.Name)
	require.Empty(t, warningsOn(t, "RBACPolicy", policies...))

	testutil.SetRBACMode(t, k8sClient, ext.Name, "Sometimes")
	testutil.EventuallyCondition(t, k8sClient, &ocv1.ClusterExtension{ObjectMeta: metav1.ObjectMeta{Name: ext.Name}},
		testutil.Condition{Type: oriav1alpha1.TypeRBACManaged, Status: metav1.ConditionFalse, Reason: oriav1alpha1.ReasonInvalidMode})
	for _, name := range active {
		waitMessage(t, name, oriav1alpha1.ReasonBound, `invalid oria.operatorframework.io/rbac-mode annotation "Sometimes"`)
	}
	got := waitReady(t, old.Name, oriav1alpha1.ReasonExpired)
	assert.NotContains(t, readyMessage(got), "Sometimes", "the grant is over: the mode does not matter to it")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, []string{ext.Name + "/" + oriav1alpha1.ReasonInvalidMode}, warningsOn(c, "ClusterExtension", ext.Name))
	}, testutil.Timeout, testutil.Interval)
	time.Sleep(2 * time.Second) // events are recorded asynchronously
	assert.Empty(t, warningsOn(t, "RBACPolicy", policies...), "the typo is warned about once, on the extension")
	got = waitReady(t, old.Name, oriav1alpha1.ReasonExpired)
	assert.NotContains(t, readyMessage(got), "Sometimes")
	_, si := compiled(active[0])
	testutil.EventuallyGet(t, k8sClient, si) // the grant in force stays

	testutil.SetRBACMode(t, k8sClient, ext.Name, oriav1alpha1.RBACModeFineGrained)
	for _, name := range active {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			p := &oriav1alpha1.RBACPolicy{}
			require.NoError(c, k8sClient.Get(context.Background(), client.ObjectKey{Name: name}, p))
			assert.NotContains(c, readyMessage(p), "Sometimes")
			assert.Contains(c, readyMessage(p), "view access")
		}, testutil.Timeout, testutil.Interval)
	}
	waitReady(t, old.Name, oriav1alpha1.ReasonExpired)
	time.Sleep(2 * time.Second)
	assert.Empty(t, warningsOn(t, "RBACPolicy", policies...))
	assert.Equal(t, []string{ext.Name + "/" + oriav1alpha1.ReasonInvalidMode}, warningsOn(t, "ClusterExtension", ext.Name))
}
