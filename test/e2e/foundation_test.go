package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/manager"
	"github.com/operator-framework/oria/internal/testutil"
)

func TestOriaServesHealthAndMetrics(t *testing.T) {
	testutil.NeedCluster(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		status, body := httpGet(oria.HealthURL + path)
		assert.Equal(t, http.StatusOK, status, "%s: %s", path, body)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		status, body := httpGet(oria.MetricsURL)
		assert.Equal(c, http.StatusOK, status)
		// Only the presence of the series: the whole exposition is too
		// long for a failure message.
		assert.True(c, strings.Contains(body, "rest_client_requests_total{"), "metrics expose rest_client_requests_total")
	}, 30*time.Second, 200*time.Millisecond)
	assert.False(t, oria.Exited(), "oria must keep running")
}

func TestLeaderElectionLease(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		lease := &coordinationv1.Lease{}
		if !assert.NoError(c, k8sClient.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: manager.LeaderElectionID}, lease)) {
			return
		}
		if assert.NotNil(c, lease.Spec.HolderIdentity) {
			assert.NotEmpty(c, *lease.Spec.HolderIdentity)
		}
	}, testutil.Timeout, testutil.Interval)
}

func TestClusterExtensionRoundTrip(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	name := testutil.UniqueName("roundtrip")
	ce := testutil.ClusterExtension(name, oriav1alpha1.RBACModeFineGrained)
	require.NoError(t, k8sClient.Create(ctx, ce))

	got := &ocv1.ClusterExtension{}
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKey{Name: name}, got))
	assert.Equal(t, ce.Spec.Namespace, got.Spec.Namespace)
	assert.Equal(t, ce.Spec.Source.Catalog.PackageName, got.Spec.Source.Catalog.PackageName)
	assert.Equal(t, "FineGrained", got.Annotations[oriav1alpha1.AnnotationRBACMode])

	require.NoError(t, k8sClient.Delete(ctx, got))
	testutil.EventuallyGone(t, k8sClient, got)
}

// TestControllerManagerRuns proves the control plane is complete: the
// aggregation controller filled the built-in admin role, and the namespace
// controller finishes a namespace deletion.
func TestControllerManagerRuns(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	admin := &rbacv1.ClusterRole{}
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKey{Name: "admin"}, admin))
	require.NotNil(t, admin.AggregationRule)
	assert.NotEmpty(t, admin.Rules, "the admin ClusterRole has aggregated rules")

	ns := testutil.Namespace(testutil.UniqueName("e2e-ns"), nil)
	require.NoError(t, k8sClient.Create(ctx, ns))
	require.NoError(t, k8sClient.Delete(ctx, ns))
	testutil.EventuallyGone(t, k8sClient, ns) // the namespace controller completes the deletion
}

// TestInvalidFlagExitsWithMessage runs the binary the way a user would with
// a mistyped flag value.
func TestInvalidFlagExitsWithMessage(t *testing.T) {
	testutil.NeedCluster(t)
	out, err := runBinary(t, "--default-rbac-mode=Sometimes")
	require.Error(t, err)
	assert.Contains(t, out, `invalid --default-rbac-mode "Sometimes": must be one of Legacy, FineGrained, Unmanaged`)
	assert.False(t, strings.Contains(out, "panic"), out)
}
