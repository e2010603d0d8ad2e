package orphans_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/manager"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestRelabelEarlierObjects: bindings an earlier oria made carry only
// app.kubernetes.io/managed-by=oria, and oria's caches filter on
// oria.operatorframework.io/managed: without the start-up relabelling, an
// orphan among them would never be seen, and its grant never revoked.
// After it, the sweep deletes the orphan and keeps the healthy one, whose
// roleRef and subjects are untouched; a second pass finds nothing.
func TestRelabelEarlierObjects(t *testing.T) {
	testutil.NeedCluster(t)
	ns := testutil.CreateNamespace(t, k8sClient, "relabel", nil)
	si := instance(t, testutil.UniqueName("si"))
	earlier := func(name, inst string) client.Object {
		rb := roleBinding(ns, name, inst)
		delete(rb.Labels, oriav1alpha1.LabelManaged)
		rb.Labels[oriav1alpha1.LabelManagedBy] = oriav1alpha1.ManagedByValue
		return rb
	}
	orphan := earlier("orphan", testutil.UniqueName("gone"))
	healthy := earlier("healthy", si.Name)
	for _, o := range []client.Object{orphan, healthy} {
		testutil.Create(t, k8sClient, o)
	}
	// Invisible to oria: the orphan outlives its owner.
	require.Never(t, func() bool {
		return apierrors.IsNotFound(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(orphan), orphan.DeepCopyObject().(client.Object)))
	}, 2*time.Second, testutil.Interval, "the orphan an earlier oria made is invisible until it is relabelled")

	r := &manager.Relabel{Reader: k8sClient, Writer: &engine.Writer{Client: k8sClient, Revoker: k8sClient, Engine: deps.Engine}, Log: logr.Discard()}
	n, err := r.Pass(context.Background())
	require.NoError(t, err)
	assert.GreaterOrEqual(t, n, 2)
	testutil.EventuallyGone(t, k8sClient, orphan)
	got := roleBinding(ns, "healthy", si.Name)
	require.NoError(t, k8sClient.Get(context.Background(), client.ObjectKeyFromObject(got), got))
	assert.Equal(t, oriav1alpha1.ManagedValue, got.Labels[oriav1alpha1.LabelManaged])
	want := roleBinding(ns, "healthy", si.Name)
	assert.Equal(t, want.RoleRef, got.RoleRef)
	assert.Equal(t, want.Subjects, got.Subjects)

	n, err = r.Pass(context.Background())
	require.NoError(t, err)
	assert.Zero(t, n, "a second pass relabels nothing")
}
