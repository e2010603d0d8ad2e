package main

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// TestObserverDeletions: an observer counts each object's arrival and
// deletion once (a tombstone included), and groups both by its label.
func TestObserverDeletions(t *testing.T) {
	o := newObserver()
	o.group = "instance"
	rb := func(ns, name, instance string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"instance": instance}}}
	}
	a, b, c := rb("n1", "x", "big"), rb("n2", "x", "big"), rb("n1", "y", "small")
	for _, obj := range []any{a, b, c, a} {
		o.add(obj)
	}
	for _, obj := range []any{a, cache.DeletedFinalStateUnknown{Key: "n2/x", Obj: b}, a, "not an object"} {
		o.delete(obj)
	}
	counts := func(ts []time.Time) int { return len(ts) }
	got := map[string]int{
		"seen": len(o.seen), "gone": len(o.gone),
		"added big": counts(o.addedIn("big")), "added small": counts(o.addedIn("small")),
		"deleted big": counts(o.deletedIn("big")), "deleted small": counts(o.deletedIn("small")),
	}
	want := map[string]int{"seen": 3, "gone": 2, "added big": 2, "added small": 1, "deleted big": 2, "deleted small": 0}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("counts (-want +got):\n%s", d)
	}
	if _, _, err := o.waitDeleted(context.Background(), 2, time.Second); err != nil {
		t.Errorf("waitDeleted(2): %v", err)
	}
	if _, _, err := o.waitDeleted(context.Background(), 3, 10*time.Millisecond); err == nil {
		t.Error("waitDeleted(3): want a timeout, 2 deletions were seen")
	}
}

// TestObserverUngrouped: without a group label nothing is kept per value.
func TestObserverUngrouped(t *testing.T) {
	o := newObserver()
	o.add(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{"instance": "big"}}})
	if n := len(o.added.byGroup); n != 0 || len(o.seen) != 1 {
		t.Errorf("ungrouped observer: %d groups, %d seen; want 0, 1", n, len(o.seen))
	}
}
