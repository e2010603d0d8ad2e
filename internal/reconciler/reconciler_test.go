package reconciler_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/operator-framework/oria/internal/reconciler"
)

// trace records which steps ran, for a ConfigMap as the reconciled kind.
type trace struct {
	cleaned, gathered, wrote, patched bool
	statusErr                         error
	// hold is what Patch returns: a status change held back that long.
	hold time.Duration
}

func steps(tr *trace, objs []corev1.ConfigMap, gatherErr, writeErr error) *reconciler.Steps[*corev1.ConfigMap, string, int] {
	b := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme)
	for i := range objs {
		b = b.WithObjects(&objs[i])
	}
	return &reconciler.Steps[*corev1.ConfigMap, string, int]{
		Client:  b.Build(),
		New:     func() *corev1.ConfigMap { return &corev1.ConfigMap{} },
		Cleanup: func(context.Context, string) error { tr.cleaned = true; return nil },
		Gather: func(context.Context, *corev1.ConfigMap) (string, error) {
			tr.gathered = true
			return "plan", gatherErr
		},
		Write: func(_ context.Context, _ *corev1.ConfigMap, p string) (int, error) {
			tr.wrote = true
			return len(p), writeErr
		},
		Status: func(_ *corev1.ConfigMap, _ string, _ int, err error) { tr.statusErr = err },
		Patch: func(context.Context, *corev1.ConfigMap, *corev1.ConfigMap) (time.Duration, error) {
			tr.patched = true
			return tr.hold, nil
		},
		Requeue: func(_ string, n int) time.Duration { return time.Duration(n) * time.Second },
	}
}

func TestSteps(t *testing.T) {
	ctx := context.Background()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "cm"}}
	cm := []corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}}}

	var tr trace
	res, err := steps(&tr, nil, nil, nil).Reconcile(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, trace{cleaned: true}, tr, "a missing object is cleaned up, nothing else")
	assert.Zero(t, res.RequeueAfter)

	tr = trace{}
	res, err = steps(&tr, cm, nil, nil).Reconcile(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, trace{gathered: true, wrote: true, patched: true}, tr)
	assert.Equal(t, 4*time.Second, res.RequeueAfter, "requeue from the plan and result")

	// A status change held back is looked at again when it is due, or
	// with the plan's requeue if that comes first.
	for _, c := range []struct{ hold, want time.Duration }{{time.Second, time.Second}, {10 * time.Second, 4 * time.Second}} {
		tr = trace{hold: c.hold}
		res, err = steps(&tr, cm, nil, nil).Reconcile(ctx, req)
		require.NoError(t, err)
		assert.Equal(t, c.want, res.RequeueAfter, "held %s", c.hold)
	}

	tr = trace{}
	boom := errors.New("cache not synced")
	_, err = steps(&tr, cm, boom, nil).Reconcile(ctx, req)
	assert.ErrorIs(t, err, boom)
	assert.Equal(t, trace{gathered: true, patched: true, statusErr: boom}, tr, "no write after a failed gather; the status says why")

	tr = trace{hold: time.Second}
	res, err = steps(&tr, cm, nil, boom).Reconcile(ctx, req)
	assert.ErrorIs(t, err, boom)
	assert.Zero(t, res.RequeueAfter, "an error is retried with backoff, not after a hold")
	assert.True(t, tr.wrote && tr.patched)
	assert.Equal(t, boom, tr.statusErr)
}

func TestRecheckIf(t *testing.T) {
	assert.Equal(t, time.Minute, reconciler.RecheckIf(true, time.Minute))
	assert.Zero(t, reconciler.RecheckIf(false, time.Minute))
}
