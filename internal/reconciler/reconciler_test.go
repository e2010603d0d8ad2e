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
	// at and priority are Requeue's instant and its priority.
	at       time.Time
	priority int
	// released counts the holds given back.
	held, released int
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
func (s fakeSteps) Requeue(_ string, n int) reconciler.Requeue {
	return reconciler.Requeue{After: time.Duration(n) * time.Second, At: s.tr.at, Priority: s.tr.priority}
}

// clockSteps are fakeSteps with a clock (reconciler.Clock) and a hold
// (reconciler.Slots).
type clockSteps struct {
	fakeSteps
	now time.Time
}

func (s clockSteps) Now() time.Time { return s.now }
func (s clockSteps) TakeSlot(context.Context, *corev1.ConfigMap) (func(), error) {
	s.tr.held++
	return func() { s.tr.released++ }, nil
}

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

// TestRequeueAt: an instant is measured by the Steps' clock when the
// reconcile ends, with its priority, when it comes first; an instant
// passed is looked at at once; a slot taken is given back once.
func TestRequeueAt(t *testing.T) {
	ctx := context.Background()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "cm"}}
	cm := []corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	prio := func(p int) *int { return &p }
	for _, c := range []struct {
		name     string
		at       time.Time
		priority int
		hold     time.Duration
		want     ctrl.Result
	}{
		{"the instant, exact, first", t0.Add(time.Second), 7, 0, ctrl.Result{RequeueAfter: time.Second, Priority: prio(7)}},
		{"the plan's requeue first", t0.Add(10 * time.Second), 7, 0, ctrl.Result{RequeueAfter: 4 * time.Second}},
		{"a hold first", t0.Add(3 * time.Second), 7, 2 * time.Second, ctrl.Result{RequeueAfter: 2 * time.Second}},
		{"passed: at once", t0.Add(-time.Second), 7, 0, ctrl.Result{RequeueAfter: time.Millisecond, Priority: prio(7)}},
		{"routine priority", t0.Add(time.Second), 0, 0, ctrl.Result{RequeueAfter: time.Second}},
		{"no instant", time.Time{}, 7, 0, ctrl.Result{RequeueAfter: 4 * time.Second}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := trace{at: c.at, priority: c.priority, hold: c.hold}
			r := steps(&tr, cm, nil, nil)
			res, err := reconciler.Reconcile(ctx, req, r.c, reconciler.Steps[*corev1.ConfigMap, string, int](clockSteps{fakeSteps: r.steps, now: t0}))
			require.NoError(t, err)
			assert.Equal(t, c.want, res)
			assert.Equal(t, 1, tr.held)
			assert.Equal(t, 1, tr.released)
		})
	}
	// An error is retried with backoff: no instant.
	tr := trace{at: t0.Add(time.Second), priority: 7}
	r := steps(&tr, cm, nil, errors.New("boom"))
	res, err := reconciler.Reconcile(ctx, req, r.c, reconciler.Steps[*corev1.ConfigMap, string, int](clockSteps{fakeSteps: r.steps, now: t0}))
	require.Error(t, err)
	assert.Equal(t, ctrl.Result{}, res)
	assert.Equal(t, 1, tr.released)
}

// reportSteps are fakeSteps that report (reconciler.Reporter): the order
// of Write, Report and Status, and what Report was given.
type reportSteps struct {
	fakeSteps
	order *[]string
	got   *int
}

func (s reportSteps) Write(ctx context.Context, cm *corev1.ConfigMap, p string) (int, error) {
	*s.order = append(*s.order, "write")
	return s.fakeSteps.Write(ctx, cm, p)
}
func (s reportSteps) Report(_ context.Context, _ *corev1.ConfigMap, _ string, n int) {
	*s.order = append(*s.order, "report")
	*s.got = n
}
func (s reportSteps) Status(cm *corev1.ConfigMap, p string, n int, err error) {
	*s.order = append(*s.order, "status")
	s.fakeSteps.Status(cm, p, n, err)
}

// TestReport: a Reporter reports after Write, whether it failed or not,
// with its result, and before Status; not after a failed Gather.
func TestReport(t *testing.T) {
	ctx := context.Background()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "cm"}}
	cm := []corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}}}
	boom := errors.New("boom")
	for _, c := range []struct {
		name                string
		gatherErr, writeErr error
		want                []string
		got                 int
	}{
		{"written", nil, nil, []string{"write", "report", "status"}, 4},
		{"a write failed", nil, boom, []string{"write", "report", "status"}, 4},
		{"gathering failed", boom, nil, []string{"status"}, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tr trace
			var order []string
			got := -1
			r := steps(&tr, cm, c.gatherErr, c.writeErr)
			_, _ = reconciler.Reconcile(ctx, req, r.c, reconciler.Steps[*corev1.ConfigMap, string, int](reportSteps{fakeSteps: r.steps, order: &order, got: &got}))
			assert.Equal(t, c.want, order)
			assert.Equal(t, c.got, got)
		})
	}
}

func TestRecheckIf(t *testing.T) {
	assert.Equal(t, time.Minute, reconciler.RecheckIf(true, time.Minute))
	assert.Zero(t, reconciler.RecheckIf(false, time.Minute))
}
