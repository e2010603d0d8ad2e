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
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// fakeSteps implements the steps for a ConfigMap, recording into a trace.
type fakeSteps struct {
	tr                  *trace
	gatherErr, writeErr error
}

func (s fakeSteps) New() *corev1.ConfigMap { return &corev1.ConfigMap{} }
func (s fakeSteps) Cleanup(context.Context, string) error {
	s.tr.cleaned = true
	return nil
}
func (s fakeSteps) Deleting(context.Context, *corev1.ConfigMap) error { return nil }
func (s fakeSteps) Gather(context.Context, *corev1.ConfigMap) (string, error) {
	s.tr.gathered = true
	return "plan", s.gatherErr
}
func (s fakeSteps) Write(_ context.Context, _ *corev1.ConfigMap, p string) (int, error) {
	s.tr.wrote = true
	return len(p), s.writeErr
}
func (s fakeSteps) Status(_ *corev1.ConfigMap, _ string, _ int, err error) { s.tr.statusErr = err }
func (s fakeSteps) Patch(context.Context, *corev1.ConfigMap, *corev1.ConfigMap) (time.Duration, error) {
	s.tr.patched = true
	return s.tr.hold, nil
}
func (s fakeSteps) Requeue(_ string, n int) time.Duration { return time.Duration(n) * time.Second }

// run reconciles with the fake steps on a client holding objs.
type run struct {
	c     client.Client
	steps fakeSteps
}

func (r run) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return reconciler.Reconcile(ctx, req, r.c, reconciler.Steps[*corev1.ConfigMap, string, int](r.steps))
}

func steps(tr *trace, objs []corev1.ConfigMap, gatherErr, writeErr error) run {
	b := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme)
	for i := range objs {
		b = b.WithObjects(&objs[i])
	}
	return run{c: b.Build(), steps: fakeSteps{tr: tr, gatherErr: gatherErr, writeErr: writeErr}}
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
