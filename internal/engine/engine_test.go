package engine_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/ownership"
)

// calls counts the requests the engine makes, by verb.
type calls struct{ create, get, del atomic.Int32 }

func fakeClient(t *testing.T, c *calls, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, oriav1alpha1.AddToScheme(scheme))
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			c.create.Add(1)
			return cl.Create(ctx, obj, opts...)
		},
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			c.get.Add(1)
			return cl.Get(ctx, key, obj, opts...)
		},
		Delete: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			c.del.Add(1)
			return cl.Delete(ctx, obj, opts...)
		},
	}).Build()
}

// writer returns a Writer over cl with an empty cache, memo (a new Memo
// when nil) and an Engine of its own.
func writer(t *testing.T, cl client.Client, memo *engine.Memo) *engine.Writer {
	t.Helper()
	if memo == nil {
		memo = engine.NewMemo()
	}
	var none calls
	return &engine.Writer{Client: cl, Revoker: cl, Reader: cl, Cache: fakeClient(t, &none), Memo: memo, Engine: engine.New(engine.Unobserved)}
}

func desiredRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	roles := binding.ClusterRoles(template("tmpl", []oriav1alpha1.ClusterRoleTemplate{{Name: "r", Rules: podRules}}))
	require.Len(t, roles, 1)
	return roles[0]
}

// TestEnsureRemembersConflicts: a name held by someone else costs one failed
// create and one read the first time, nothing while remembered, one read
// per recheck, and oria's object is created once the name is free.
func TestEnsureRemembersConflicts(t *testing.T) {
	ctx := context.Background()
	want := desiredRole(t)
	foreign := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: want.Name, Labels: map[string]string{"team": "x"}}}
	var c calls
	cl := fakeClient(t, &c, foreign)
	now := time.Unix(1000, 0)
	memo := engine.NewMemo()
	memo.Now = func() time.Time { return now }
	w := writer(t, cl, memo)
	w.Recheck = time.Minute
	owns := func(o client.Object) bool { return ownership.TemplateOwns(o, "tmpl") }
	kind := engine.ClusterRoleKind()
	ensure := func() engine.Outcome {
		out := engine.Ensure(ctx, w, kind, owns, []*rbacv1.ClusterRole{want}, nil)
		require.Len(t, out, 1)
		return out[0]
	}

	o := ensure()
	assert.Equal(t, engine.Conflict, o.Action)
	assert.Equal(t, "x", o.Existing.GetLabels()["team"], "the conflicting object is reported")
	assert.Equal(t, [2]int32{1, 1}, [2]int32{c.create.Load(), c.get.Load()}, "first time: one create, one read")

	o = ensure()
	assert.Equal(t, engine.Conflict, o.Action)
	assert.Equal(t, [2]int32{1, 1}, [2]int32{c.create.Load(), c.get.Load()}, "remembered: no request")

	now = now.Add(time.Minute)
	o = ensure()
	assert.Equal(t, engine.Conflict, o.Action)
	assert.Equal(t, [2]int32{1, 2}, [2]int32{c.create.Load(), c.get.Load()}, "recheck: a read, never a failed create")

	require.NoError(t, cl.Delete(ctx, foreign))
	now = now.Add(time.Minute)
	o = ensure()
	assert.Equal(t, engine.Created, o.Action, "the name is free again")
	assert.Equal(t, [2]int32{2, 3}, [2]int32{c.create.Load(), c.get.Load()})
	assert.Zero(t, memo.Len())
}

// TestEnsureCreatesWithoutReading: an absent object costs exactly one
// create, and an up-to-date cached one nothing.
func TestEnsureCreatesWithoutReading(t *testing.T) {
	ctx := context.Background()
	want := desiredRole(t)
	var c calls
	cl := fakeClient(t, &c)
	w := writer(t, cl, nil)
	owns := func(o client.Object) bool { return ownership.TemplateOwns(o, "tmpl") }
	out := engine.Ensure(ctx, w, engine.ClusterRoleKind(), owns, []*rbacv1.ClusterRole{want}, nil)
	assert.Equal(t, engine.Created, out[0].Action)
	assert.Equal(t, [2]int32{1, 0}, [2]int32{c.create.Load(), c.get.Load()})

	cached := map[types.NamespacedName]*rbacv1.ClusterRole{engine.Key(want): want.DeepCopy()}
	out = engine.Ensure(ctx, w, engine.ClusterRoleKind(), owns, []*rbacv1.ClusterRole{want}, cached)
	assert.Equal(t, engine.Unchanged, out[0].Action)
	assert.Equal(t, [2]int32{1, 0}, [2]int32{c.create.Load(), c.get.Load()}, "an unchanged world costs nothing")
}

// TestEnsureAdoptsItsOwnObject: oria's object whose labels someone removed
// (so the cache does not show it) is found by its controller reference and
// repaired, not reported as a conflict.
func TestEnsureAdoptsItsOwnObject(t *testing.T) {
	ctx := context.Background()
	want := desiredRole(t)
	stripped := want.DeepCopy()
	stripped.Labels = nil
	var c calls
	cl := fakeClient(t, &c, stripped)
	w := writer(t, cl, nil)
	owns := func(o client.Object) bool { return ownership.TemplateOwns(o, "tmpl") }
	out := engine.Ensure(ctx, w, engine.ClusterRoleKind(), owns, []*rbacv1.ClusterRole{want}, nil)
	require.NoError(t, out[0].Err)
	assert.Equal(t, engine.Updated, out[0].Action)
	got := &rbacv1.ClusterRole{}
	require.NoError(t, cl.Get(ctx, engine.Key(want), got))
	assert.Equal(t, want.Labels, got.Labels)
}

// TestDeleteIsPreconditioned: a deleted object counts as deleted, one that
// is already gone too.
func TestDelete(t *testing.T) {
	ctx := context.Background()
	want := desiredRole(t)
	var c calls
	cl := fakeClient(t, &c, want.DeepCopy())
	live := &rbacv1.ClusterRole{}
	require.NoError(t, cl.Get(ctx, engine.Key(want), live))
	w := writer(t, cl, nil)
	out := engine.Delete(ctx, w, "ClusterRole", []*rbacv1.ClusterRole{live, live})
	assert.Equal(t, engine.Deleted, out[0].Action)
	assert.Equal(t, engine.Deleted, out[1].Action, "already gone")
	assert.Empty(t, engine.Summarize(out).Errors)
}

// TestCeilingRefusal: writing as a ceiling's ServiceAccount, a write the API
// server forbids is the outcome Forbidden (reported, not an error to retry
// with backoff); without one it is a failure. Deletions go through the
// revoker.
func TestCeilingRefusal(t *testing.T) {
	ctx := context.Background()
	want := desiredRole(t)
	forbidden := func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		return apierrors.NewForbidden(rbacv1.Resource("clusterroles"), obj.GetName(), errors.New("attempting to grant RBAC permissions not currently held"))
	}
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	grants := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{Create: forbidden}).Build()
	owns := func(o client.Object) bool { return ownership.TemplateOwns(o, "tmpl") }

	w := writer(t, grants, nil)
	w.Ceiling = true
	out := engine.Ensure(ctx, w, engine.ClusterRoleKind(), owns, []*rbacv1.ClusterRole{want}, nil)
	assert.Equal(t, engine.Forbidden, out[0].Action)
	assert.Contains(t, out[0].Err.Error(), "not currently held")
	s := engine.Summarize(out)
	assert.Len(t, s.Forbidden, 1)
	assert.Empty(t, s.Errors)

	w.Ceiling = false
	out = engine.Ensure(ctx, w, engine.ClusterRoleKind(), owns, []*rbacv1.ClusterRole{want}, nil)
	assert.Equal(t, engine.Failed, out[0].Action, "oria's own refusal is an error")

	var c calls
	revoker := fakeClient(t, &c, want.DeepCopy())
	live := &rbacv1.ClusterRole{}
	require.NoError(t, revoker.Get(ctx, engine.Key(want), live))
	w = writer(t, grants, nil)
	w.Reader, w.Revoker, w.Ceiling = revoker, revoker, true
	out = engine.Delete(ctx, w, "ClusterRole", []*rbacv1.ClusterRole{live})
	assert.Equal(t, engine.Deleted, out[0].Action)
	assert.Equal(t, int32(1), c.del.Load(), "deleted by the revoker")
}

// TestEnsureExpectsWhatItCreated: a reconcile that runs before the cache
// shows what the previous one created does not create it again (a 409 and
// a read each); the caller is told to look again after ExpectationTTL, by
// which time an object that vanished meanwhile is created again.
func TestEnsureExpectsWhatItCreated(t *testing.T) {
	ctx := context.Background()
	want := desiredRole(t)
	var c calls
	cl := fakeClient(t, &c)
	now := time.Unix(1000, 0)
	memo := engine.NewMemo()
	memo.Now = func() time.Time { return now }
	w := writer(t, cl, memo)
	owns := func(o client.Object) bool { return ownership.TemplateOwns(o, "tmpl") }
	ensure := func(cached map[types.NamespacedName]*rbacv1.ClusterRole) engine.Summary {
		return engine.Summarize(engine.Ensure(ctx, w, engine.ClusterRoleKind(), owns, []*rbacv1.ClusterRole{want}, cached))
	}

	require.Equal(t, 1, ensure(nil).Count[engine.Created])
	s := ensure(nil) // the cache has not caught up
	assert.Equal(t, 1, s.Expected)
	assert.Equal(t, engine.ExpectationTTL, s.Recheck())
	assert.Equal(t, int32(1), c.create.Load(), "not created twice")

	// Deleted before the cache ever showed it: after the TTL it is created
	// again.
	require.NoError(t, cl.Delete(ctx, want.DeepCopy()))
	now = now.Add(engine.ExpectationTTL)
	s = ensure(nil)
	assert.Equal(t, 1, s.Count[engine.Created])

	// Once the cache shows it, the expectation is gone.
	live := &rbacv1.ClusterRole{}
	require.NoError(t, cl.Get(ctx, engine.Key(want), live))
	s = ensure(map[types.NamespacedName]*rbacv1.ClusterRole{engine.Key(want): live})
	assert.Zero(t, s.Expected)
	assert.Zero(t, s.Recheck())
	assert.Zero(t, memo.Expectations())

	// Created and deleted before any reconcile saw it in the cache (the
	// watch's delete event: Memo.Gone): created again at once, not after
	// the TTL.
	require.NoError(t, cl.Delete(ctx, live))
	require.Equal(t, 1, ensure(nil).Count[engine.Created])
	require.NoError(t, cl.Delete(ctx, want.DeepCopy()))
	memo.Gone(engine.ClusterRoleKind().Name, want)
	assert.Equal(t, 1, ensure(nil).Count[engine.Created], "created again")
	live = &rbacv1.ClusterRole{}
	require.NoError(t, cl.Get(ctx, engine.Key(want), live))
	ensure(map[types.NamespacedName]*rbacv1.ClusterRole{engine.Key(want): live}) // seen: expectation met

	// An expectation nobody asks about again expires with the next create
	// after the TTL instead of staying for the life of the process.
	require.NoError(t, cl.Delete(ctx, live))
	require.Equal(t, 1, ensure(nil).Count[engine.Created])
	require.Equal(t, 1, memo.Expectations())
	now = now.Add(engine.ExpectationTTL)
	other := want.DeepCopy()
	other.Name += "-other"
	engine.Ensure(ctx, w, engine.ClusterRoleKind(), owns, []*rbacv1.ClusterRole{other}, nil)
	assert.Equal(t, 1, memo.Expectations(), "the expired expectation is gone, the new one kept")
}

// TestParallelSharesTheProcessCap: however many reconciles write at once,
// no more than MaxInFlight writes are in flight.
func TestParallelSharesTheProcessCap(t *testing.T) {
	var now, peak atomic.Int64
	var wg sync.WaitGroup
	release := make(chan struct{})
	e := engine.New(engine.Unobserved)
	for range 3 { // 3 x 64 workers would be 192 at once without the cap
		wg.Go(func() {
			e.Parallel(engine.DefaultWorkers, engine.DefaultWorkers, func(int) {
				n := now.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				<-release
				now.Add(-1)
			})
		})
	}
	require.Eventually(t, func() bool { return now.Load() == engine.MaxInFlight }, 10*time.Second, time.Millisecond,
		"the writes fill the cap")
	close(release)
	wg.Wait()
	assert.Equal(t, int64(engine.MaxInFlight), peak.Load())
}

// TestEnsureAfterTheWatchSawTheCreate: the watch's create event ends an
// expectation (Memo.Seen), so expectations last only while the watch lags.
// A reconcile whose snapshot predates the event finds the object in the
// cache as it is now (Writer.Cache) and does not create it again; one the
// cache shows for another owner is still found in conflict.
func TestEnsureAfterTheWatchSawTheCreate(t *testing.T) {
	ctx := context.Background()
	want := desiredRole(t)
	var c, cacheCalls calls
	cl := fakeClient(t, &c)
	memo := engine.NewMemo()
	owns := func(o client.Object) bool { return ownership.TemplateOwns(o, "tmpl") }
	w := writer(t, cl, memo)
	ensure := func() engine.Summary {
		return engine.Summarize(engine.Ensure(ctx, w, engine.ClusterRoleKind(), owns, []*rbacv1.ClusterRole{want}, nil))
	}

	require.Equal(t, 1, ensure().Count[engine.Created])
	require.Equal(t, 1, memo.Expectations())
	live := &rbacv1.ClusterRole{}
	require.NoError(t, cl.Get(ctx, engine.Key(want), live))
	memo.Of(engine.ClusterRoleKind().Name).Seen(live) // the watch's create event
	assert.Zero(t, memo.Expectations(), "the create event ends the expectation")

	// The cache shows it now; the reconcile's snapshot (nil) does not.
	w.Cache = fakeClient(t, &cacheCalls, live.DeepCopy())
	gets := c.get.Load()
	s := ensure()
	assert.Equal(t, 1, s.Expected, "counted as expected: the next reconcile sees it")
	assert.Equal(t, int32(1), c.create.Load(), "not created again")
	assert.Equal(t, gets, c.get.Load(), "no read of the API server")
	assert.Equal(t, int32(1), cacheCalls.get.Load(), "one read of the cache")

	// With a cache that does not show it yet (nor an expectation) it would
	// have been created: the create fails (409) and the read finds it
	// oria's.
	w.Cache = fakeClient(t, &cacheCalls)
	s = ensure()
	assert.Equal(t, 1, s.Count[engine.Unchanged])
	assert.Equal(t, int32(2), c.create.Load())

	// The cache shows another owner's object under the name: the usual
	// way, a create (409) and a read, and a conflict.
	foreign := live.DeepCopy()
	foreign.OwnerReferences = nil
	foreign.Labels = map[string]string{oriav1alpha1.LabelManaged: oriav1alpha1.ManagedValue}
	api := fakeClient(t, &c, foreign.DeepCopy())
	w = writer(t, api, nil)
	w.Cache = fakeClient(t, &cacheCalls, foreign)
	s = engine.Summarize(engine.Ensure(ctx, w, engine.ClusterRoleKind(), owns, []*rbacv1.ClusterRole{want}, nil))
	assert.Equal(t, 1, s.Count[engine.Conflict])
}
