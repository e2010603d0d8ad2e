package scopeinstance

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/reconciler"
)

// TestRequeueInstant: the requeue for the window's next instant that
// changes its phase carries that instant and its priority (a gated grant
// 3, a small grant 2, another fan-out 1); the expiry warning comes at
// routine priority; a gate emptied at the expiry, or a status postponed at
// the instant (postponesStatus), asks to look again at once, at routine priority.
func TestRequeueInstant(t *testing.T) {
	small := oriav1alpha1.ScopeInstanceSpec{Namespaces: []string{"a"}}
	selector := oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: &metav1.LabelSelector{}}
	gated := oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: &metav1.LabelSelector{}, ExpiresAt: at(time.Minute)}
	open := func(w binding.Window) *plan { return &plan{now: t0, window: w} }
	deletedOne := engine.Summarize([]engine.Outcome{{Namespace: "a", Name: "b", Action: engine.Deleted}})
	createdOne := engine.Summarize([]engine.Outcome{{Namespace: "a", Name: "b", Action: engine.Created}})
	for _, tc := range []struct {
		name string
		p    *plan
		spec oriav1alpha1.ScopeInstanceSpec
		lead time.Duration
		res  result
		want reconciler.Requeue
	}{
		{"pending: the grant at notBefore, first", closed(binding.Window{NotBefore: at(time.Hour), ExpiresAt: at(2 * time.Hour)}, false), small, 0, result{},
			reconciler.Requeue{At: t0.Add(time.Hour), Priority: 2}},
		{"pending fan-out: the grant at notBefore, after the small ones", closed(binding.Window{NotBefore: at(time.Hour)}, false), selector, 0, result{},
			reconciler.Requeue{At: t0.Add(time.Hour), Priority: 1}},
		{"open: the revocation at expiresAt, first", open(binding.Window{ExpiresAt: at(time.Minute)}), small, 15 * time.Minute, result{},
			reconciler.Requeue{At: t0.Add(time.Minute), Priority: 2}},
		{"open fan-out: the revocation at expiresAt, after the small ones", open(binding.Window{ExpiresAt: at(time.Minute)}), selector, 0, result{},
			reconciler.Requeue{At: t0.Add(time.Minute), Priority: 1}},
		{"open gated grant: the gate emptied at expiresAt, before everything else", open(binding.Window{ExpiresAt: at(time.Minute)}), gated, 0, result{},
			reconciler.Requeue{At: t0.Add(time.Minute), Priority: 3}},
		{"open, the warning first: routine priority", open(binding.Window{ExpiresAt: at(time.Hour)}), small, 15 * time.Minute, result{},
			reconciler.Requeue{At: t0.Add(45 * time.Minute)}},
		{"open, no end: never", open(binding.Window{NotBefore: at(-time.Hour)}), small, 15 * time.Minute, result{}, reconciler.Requeue{}},
		{"no window: never", open(binding.Window{}), small, 15 * time.Minute, result{}, reconciler.Requeue{}},
		{"expired: never again", closed(binding.Window{ExpiresAt: at(-time.Second)}, false), small, 0, result{}, reconciler.Requeue{}},
		{"the gate emptied at the expiry: at once, routine", closed(binding.Window{ExpiresAt: at(-time.Second)}, false), gated, 0, result{again: true},
			reconciler.Requeue{At: t0}},
		{"revoked at the instant, its status postponed: at once, routine", closed(binding.Window{ExpiresAt: at(-300 * time.Millisecond)}, false), small, 0, result{summary: deletedOne},
			reconciler.Requeue{At: t0}},
		{"bound at the instant, its status postponed: at once, routine", open(binding.Window{NotBefore: at(-300 * time.Millisecond), ExpiresAt: at(time.Minute)}), small, 0,
			result{summary: createdOne}, reconciler.Requeue{At: t0}},
		{"revoked well after the instant: nothing postponed, never again", closed(binding.Window{ExpiresAt: at(-2 * time.Second)}, false), small, 0, result{summary: deletedOne},
			reconciler.Requeue{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReconciler(Deps{}, Options{ExpiryWarning: tc.lead, Now: func() time.Time { return t0 }})
			tc.p.priority = instantPriority(tc.spec)
			if got := r.Requeue(tc.p, tc.res); got != tc.want {
				t.Errorf("Requeue = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestTakeSlot: a fan-out that binds now (inside its window, or gated before
// it) waits for a bind slot, and gives it back; a small grant, a fan-out
// outside its window and a fan-out pending without a gate take none.
func TestTakeSlot(t *testing.T) {
	ctx := context.Background()
	many := make([]string, binding.SmallGrant+1)
	for i := range many {
		many[i] = string(rune('a' + i%26))
	}
	for _, tc := range []struct {
		name string
		spec oriav1alpha1.ScopeInstanceSpec
		want bool
	}{
		{"a selector", oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: &metav1.LabelSelector{}}, true},
		{"more than binding.SmallGrant listed", oriav1alpha1.ScopeInstanceSpec{Namespaces: many}, true},
		{"a gated fan-out before its window", oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: &metav1.LabelSelector{}, NotBefore: at(time.Hour)}, true},
		{"binding.SmallGrant listed", oriav1alpha1.ScopeInstanceSpec{Namespaces: many[:binding.SmallGrant]}, false},
		{"cluster-wide", oriav1alpha1.ScopeInstanceSpec{}, false},
		{"a fan-out expired", oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: &metav1.LabelSelector{}, ExpiresAt: at(-time.Second)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReconciler(Deps{}, Options{MaxConcurrentReconciles: 1, Now: func() time.Time { return t0 }})
			si := &oriav1alpha1.ScopeInstance{Spec: tc.spec}
			release, err := r.TakeSlot(ctx, si)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(r.binds) == 1; got != tc.want {
				t.Fatalf("slot taken: %v, want %v", got, tc.want)
			}
			if !tc.want {
				release()
				return
			}
			short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			defer cancel()
			if _, err := r.TakeSlot(short, si); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("a second fan-out with one slot: %v, want to wait until the deadline", err)
			}
			release()
			if len(r.binds) != 0 {
				t.Fatal("the slot was not given back")
			}
		})
	}
}
