package admission

import (
	"context"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestModePolicy: the optional ValidatingAdmissionPolicy of
// config/mode-policy refuses an unknown RBAC mode on a ClusterExtension,
// naming the annotation, and admits the three modes and no annotation.
func TestModePolicy(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	admin, err := testutil.AdminClient(cluster)
	require.NoError(t, err)
	f, err := os.Open("../../config/mode-policy/policy.yaml")
	require.NoError(t, err)
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		require.NoError(t, admin.Create(ctx, u))
		t.Cleanup(func() { _ = admin.Delete(ctx, u) })
	}

	bad := testutil.ClusterExtension(testutil.UniqueName("typo"), "legacy")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := admin.Create(ctx, bad.DeepCopy())
		if !assert.Error(c, err, "the policy is in force") {
			_ = admin.Delete(ctx, bad)
			return
		}
		assert.True(c, apierrors.IsInvalid(err), "%v", err)
		assert.Contains(c, err.Error(), `metadata.annotations[oria.operatorframework.io/rbac-mode]: "legacy" is not an oria RBAC mode`)
	}, testutil.Timeout, testutil.Interval)

	for _, mode := range []oriav1alpha1.RBACMode{oriav1alpha1.RBACModeLegacy, oriav1alpha1.RBACModeFineGrained, oriav1alpha1.RBACModeUnmanaged, ""} {
		ext := testutil.ClusterExtension(testutil.UniqueName("mode"), mode)
		require.NoError(t, admin.Create(ctx, ext), "mode %q", mode)
		t.Cleanup(func() { _ = admin.Delete(ctx, ext) })
		if mode == oriav1alpha1.RBACModeLegacy {
			err := admin.Patch(ctx, ext, client.RawPatch("application/merge-patch+json",
				[]byte(`{"metadata":{"annotations":{"oria.operatorframework.io/rbac-mode":"Fine-Grained"}}}`)))
			require.Error(t, err, "an update to an unknown mode is refused too")
			assert.Contains(t, err.Error(), `"Fine-Grained" is not an oria RBAC mode`)
		}
	}
}
