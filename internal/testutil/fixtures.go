package testutil

import (
	"context"
	"testing"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// Create creates obj and deletes it when the test ends.
func Create(t testing.TB, c client.Client, obj client.Object, opts ...client.CreateOption) {
	t.Helper()
	require.NoError(t, c.Create(context.Background(), obj, opts...), "creating %T %s", obj, obj.GetName())
	t.Cleanup(func() { _ = c.Delete(context.Background(), obj) })
}

// CreateNamespace creates a namespace named prefix-<random> with labels,
// deletes it when the test ends and returns its name. (Without
// kube-controller-manager a deleted namespace stays terminating, which no
// test of another name notices.)
func CreateNamespace(t testing.TB, c client.Client, prefix string, labels map[string]string) string {
	t.Helper()
	ns := Namespace(UniqueName(prefix), labels)
	Create(t, c, ns)
	return ns.Name
}

// Update reads obj again (by its name and namespace), applies change to it
// and writes it back; when a controller wrote the object in between (a
// conflict), it reads, changes and writes again.
func Update[T client.Object](t testing.TB, c client.Client, obj T, change func(), opts ...client.UpdateOption) {
	t.Helper()
	require.NoError(t, retryOnConflict(c, obj, change, func() error {
		return c.Update(context.Background(), obj, opts...)
	}), "updating %T %s", obj, obj.GetName())
}

// UpdateStatus is Update for the status subresource.
func UpdateStatus[T client.Object](t testing.TB, c client.Client, obj T, change func(), opts ...client.SubResourceUpdateOption) {
	t.Helper()
	require.NoError(t, retryOnConflict(c, obj, change, func() error {
		return c.Status().Update(context.Background(), obj, opts...)
	}), "updating the status of %T %s", obj, obj.GetName())
}

// retryOnConflict gets obj, changes it and writes it, again while the write
// conflicts.
func retryOnConflict(c client.Reader, obj client.Object, change func(), write func() error) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change()
		return write()
	})
}

// SetRBACMode sets the rbac-mode annotation of the named ClusterExtension
// as `kubectl annotate --overwrite` would; mode "" removes it. Any string
// may be set, invalid modes included.
func SetRBACMode(t testing.TB, c client.Client, name string, mode oriav1alpha1.RBACMode) {
	t.Helper()
	ce := &ocv1.ClusterExtension{ObjectMeta: metav1.ObjectMeta{Name: name}}
	Update(t, c, ce, func() {
		if mode == "" {
			delete(ce.Annotations, oriav1alpha1.AnnotationRBACMode)
			return
		}
		if ce.Annotations == nil {
			ce.Annotations = map[string]string{}
		}
		ce.Annotations[oriav1alpha1.AnnotationRBACMode] = string(mode)
	})
}
