package testutil

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The Eventually helpers below run their checks with require.EventuallyWithT
// and fail only through its CollectT: nothing calls FailNow of the test
// from the goroutine that runs the checks.

// Condition is what EventuallyCondition waits for: the condition of Type,
// about the object's current generation (as is the status'
// observedGeneration, for kinds that have one), with Status and Reason
// (either not checked when empty) and a message that contains each of
// Message.
type Condition struct {
	Type    string
	Status  metav1.ConditionStatus
	Reason  string
	Message []string
}

// EventuallyCondition waits until obj (read again by its name and
// namespace, from c) has the wanted condition, and returns the object and
// the condition as last read.
func EventuallyCondition[T client.Object](t testing.TB, c client.Reader, obj T, want Condition) (T, metav1.Condition) {
	t.Helper()
	var got T
	var cond metav1.Condition
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		o := obj.DeepCopyObject().(T)
		require.NoError(ct, c.Get(context.Background(), client.ObjectKeyFromObject(obj), o))
		observed, conds := status(ct, o)
		found := meta.FindStatusCondition(conds, want.Type)
		require.NotNil(ct, found, "no %s condition yet", want.Type)
		assert.Equal(ct, o.GetGeneration(), found.ObservedGeneration, "%s condition of an older generation: %s", want.Type, found.Message)
		if observed != nil {
			assert.Equal(ct, o.GetGeneration(), *observed, "status.observedGeneration")
		}
		if want.Status != "" {
			assert.Equal(ct, want.Status, found.Status, "%s: %s", found.Reason, found.Message)
		}
		if want.Reason != "" {
			assert.Equal(ct, want.Reason, found.Reason, found.Message)
		}
		for _, m := range want.Message {
			assert.Contains(ct, found.Message, m)
		}
		got, cond = o, *found
	}, Timeout, Interval, "%T %s: condition %+v", obj, obj.GetName(), want)
	return got, cond
}

// status returns the status' observedGeneration (nil when the kind has
// none, or it is not set) and conditions of any object that keeps them at
// status.observedGeneration and status.conditions.
func status(t require.TestingT, obj client.Object) (*int64, []metav1.Condition) {
	b, err := json.Marshal(obj)
	require.NoError(t, err)
	var s struct {
		Status struct {
			ObservedGeneration *int64             `json:"observedGeneration"`
			Conditions         []metav1.Condition `json:"conditions"`
		} `json:"status"`
	}
	require.NoError(t, json.Unmarshal(b, &s))
	return s.Status.ObservedGeneration, s.Status.Conditions
}

// EventuallyGet waits until obj (by its name and namespace) exists, and
// returns it as read.
func EventuallyGet[T client.Object](t testing.TB, c client.Reader, obj T) T {
	t.Helper()
	var got T
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		o := obj.DeepCopyObject().(T)
		require.NoError(ct, c.Get(context.Background(), client.ObjectKeyFromObject(obj), o))
		got = o
	}, Timeout, Interval)
	return got
}

// EventuallyGone waits until none of objs (by name and namespace) exists.
func EventuallyGone(t testing.TB, c client.Reader, objs ...client.Object) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		for _, obj := range objs {
			err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
			assert.True(ct, apierrors.IsNotFound(err), "%T %s still exists (%v)", obj, obj.GetName(), err)
		}
	}, Timeout, Interval)
}

// EventuallyEvents waits until Events with each of reasons exist regarding
// the object of kind and name.
func EventuallyEvents(t testing.TB, c client.Reader, kind, name string, reasons ...string) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		list := &eventsv1.EventList{}
		require.NoError(ct, c.List(context.Background(), list))
		var got []string
		for _, ev := range list.Items {
			if ev.Regarding.Kind == kind && ev.Regarding.Name == name {
				got = append(got, ev.Reason)
			}
		}
		for _, r := range reasons {
			assert.True(ct, slices.Contains(got, r), "no %s event for %s %s; got %v", r, kind, name, got)
		}
	}, Timeout, Interval)
}

// EventuallyQuiet waits until a reconcile of req through r succeeds without
// a write (w counts r's writes): the cache r reads may lag the API server
// by a moment.
func EventuallyQuiet(t testing.TB, r reconcile.Reconciler, w *WriteCounter, req reconcile.Request) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		w.Reset()
		_, err := r.Reconcile(context.Background(), req)
		require.NoError(ct, err)
		assert.Zero(ct, w.Total(), "writes: %s", w)
	}, Timeout, Interval, "a reconcile of %s that writes nothing", req)
}

// Quiet reconciles req through r n times and requires that each succeeds
// without a write (w counts r's writes): an unchanged world must cost the
// API server nothing but (cached) reads.
func Quiet(t testing.TB, r reconcile.Reconciler, w *WriteCounter, req reconcile.Request, n int) {
	t.Helper()
	w.Reset()
	for range n {
		_, err := r.Reconcile(context.Background(), req)
		require.NoError(t, err)
	}
	require.Zero(t, w.Total(), "writes on an unchanged world (%s): %s", req, w)
}

// EventuallyCached waits until cache (a manager's client) holds each of
// objs (by name and namespace) at the resourceVersion the API server (live)
// has: a reconcile through cache then sees the world as it is.
func EventuallyCached(t testing.TB, cache, live client.Reader, objs ...client.Object) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		for _, obj := range objs {
			key := client.ObjectKeyFromObject(obj)
			l, c := obj.DeepCopyObject().(client.Object), obj.DeepCopyObject().(client.Object)
			require.NoError(ct, live.Get(context.Background(), key, l))
			require.NoError(ct, cache.Get(context.Background(), key, c))
			assert.Equal(ct, l.GetResourceVersion(), c.GetResourceVersion(), "%T %s in the cache", obj, key)
		}
	}, Timeout, Interval)
}

// Tail prints the last n lines of a file to stderr, to explain a failure
// (a process's log).
func Tail(path string, n int) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	fmt.Fprintf(os.Stderr, "---- last %d lines of %s ----\n%s\n----\n", len(lines), path, strings.Join(lines, "\n"))
}
