package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestServiceAccountCreatedLater: a ServiceAccount created after the
// instance that names it is noticed within seconds (oria's default recheck
// of other states is 30 s).
func TestServiceAccountCreatedLater(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns := createNamespace(t, "sa-later", nil)
	name := testutil.UniqueName("sa-later")
	tmpl := testutil.ScopeTemplate(name, []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User("nobody"))
	si := scopeInstance(name, name, ns)
	si.Spec.ServiceAccount = &oriav1alpha1.ServiceAccountReference{Namespace: ns, Name: "ceiling"}
	require.NoError(t, k8sClient.Create(ctx, tmpl))
	require.NoError(t, k8sClient.Create(ctx, si))
	cleanup(t, tmpl, si)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cond := readyOf(c, si, func() []metav1.Condition { return si.Status.Conditions })
		if assert.NotNil(c, cond) {
			assert.Equal(c, oriav1alpha1.ReasonServiceAccountNotFound, cond.Reason)
		}
	}, testutil.Timeout, testutil.Interval)

	start := time.Now()
	require.NoError(t, k8sClient.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ceiling"}}))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cond := readyOf(c, si, func() []metav1.Condition { return si.Status.Conditions })
		if assert.NotNil(c, cond) {
			assert.NotEqual(c, oriav1alpha1.ReasonServiceAccountNotFound, cond.Reason)
		}
	}, 10*time.Second, testutil.Interval)
	t.Logf("noticed %s after the ServiceAccount was created", time.Since(start).Round(time.Millisecond))
}
