package scopeinstance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
)

// TestTurnResult: the requeue for the window's instant is measured from
// when the reconcile ends (not from before its status write), with its
// priority, when it comes first; an earlier requeue, an error, or no
// instant leave the result as it is.
func TestTurnResult(t *testing.T) {
	end := t0.Add(300 * time.Millisecond) // the status write took 300 ms
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		at   time.Time
		res  ctrl.Result
		err  error
		want ctrl.Result
	}{
		{"the instant, exact", t0.Add(10 * time.Second), ctrl.Result{RequeueAfter: 10 * time.Second},
			nil, ctrl.Result{RequeueAfter: 9700 * time.Millisecond, Priority: ptr.To(7)}},
		{"an earlier requeue first", t0.Add(10 * time.Second), ctrl.Result{RequeueAfter: time.Second}, nil, ctrl.Result{RequeueAfter: time.Second}},
		{"an instant passed meanwhile: at once", t0.Add(100 * time.Millisecond), ctrl.Result{RequeueAfter: 100 * time.Millisecond},
			nil, ctrl.Result{RequeueAfter: time.Millisecond, Priority: ptr.To(7)}},
		{"no instant", time.Time{}, ctrl.Result{RequeueAfter: time.Minute}, nil, ctrl.Result{RequeueAfter: time.Minute}},
		{"an error: backoff", t0.Add(10 * time.Second), ctrl.Result{}, boom, ctrl.Result{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, tn := withTurn(context.Background(), nil)
			if !tc.at.IsZero() {
				tn.requeueAt(tc.at, 7)
			}
			if d := cmp.Diff(tc.want, tn.result(tc.res, tc.err, end)); d != "" {
				t.Errorf("result (-want +got):\n%s", d)
			}
		})
	}
	var none *turn
	if got := none.result(ctrl.Result{RequeueAfter: time.Second}, nil, end); got.RequeueAfter != time.Second {
		t.Errorf("no turn: %v", got)
	}
}

// TestTurnBind: binds take a slot each, once per turn, until done; a
// reconcile without a turn (a step alone) takes none.
func TestTurnBind(t *testing.T) {
	ctx := context.Background()
	binds := make(chan struct{}, 2)
	_, a := withTurn(ctx, binds)
	_, b := withTurn(ctx, binds)
	_, c := withTurn(ctx, binds)
	for _, tn := range []*turn{a, a, b} {
		if err := tn.bind(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(binds) != 2 {
		t.Fatalf("%d slots taken, want 2", len(binds))
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := c.bind(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a third bind with two slots: %v, want to wait until the deadline", err)
	}
	a.done()
	a.done()
	if err := c.bind(ctx); err != nil || len(binds) != 2 {
		t.Fatalf("bind after a slot was given back: %v, %d taken", err, len(binds))
	}
	if err := turnFrom(ctx).bind(ctx); err != nil {
		t.Errorf("no turn: %v", err)
	}
}

// TestWindowInstant: what Gather notes in its turn: the window's next
// instant that changes its phase (not the expiry warning), with the
// requeue's priority (a gated grant 3, a small grant 2, another fan-out 1).
func TestWindowInstant(t *testing.T) {
	small := oriav1alpha1.ScopeInstanceSpec{Namespaces: []string{"a"}}
	selector := oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: &metav1.LabelSelector{}}
	gated := oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: &metav1.LabelSelector{}, ExpiresAt: at(time.Minute)}
	for _, tc := range []struct {
		name     string
		p        *plan
		spec     oriav1alpha1.ScopeInstanceSpec
		lead     time.Duration
		wantAt   time.Time
		priority int
	}{
		{"pending: the grant at notBefore, first", closed(binding.Window{NotBefore: at(time.Hour), ExpiresAt: at(2 * time.Hour)}, false), small, 0, t0.Add(time.Hour), 2},
		{"pending fan-out: the grant at notBefore, after the small ones", closed(binding.Window{NotBefore: at(time.Hour)}, false), selector, 0, t0.Add(time.Hour), 1},
		{"open: the revocation at expiresAt, first", &plan{now: t0, window: binding.Window{ExpiresAt: at(time.Minute)}, bind: &bindPlan{}},
			small, 15 * time.Minute, t0.Add(time.Minute), 2},
		{"open fan-out: the revocation at expiresAt, after the small ones", &plan{now: t0, window: binding.Window{ExpiresAt: at(time.Minute)}, bind: &bindPlan{}},
			selector, 0, t0.Add(time.Minute), 1},
		{"open gated grant: the gate emptied at expiresAt, before everything else", &plan{now: t0, window: binding.Window{ExpiresAt: at(time.Minute)}, bind: &bindPlan{}},
			gated, 0, t0.Add(time.Minute), 3},
		{"open, the warning first: no instant", &plan{now: t0, window: binding.Window{ExpiresAt: at(time.Hour)}, bind: &bindPlan{}}, small, 15 * time.Minute, time.Time{}, 0},
		{"expired: none", closed(binding.Window{ExpiresAt: at(-time.Second)}, false), small, 0, time.Time{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReconciler(Deps{}, Options{ExpiryWarning: tc.lead, Now: func() time.Time { return t0 }})
			var got turn
			if at, change := r.windowInstant(tc.p); change {
				got.requeueAt(at, instantPriority(tc.spec))
			}
			if !got.at.Equal(tc.wantAt) || got.priority != tc.priority {
				t.Errorf("instant %v priority %d, want %v, %d", got.at, got.priority, tc.wantAt, tc.priority)
			}
		})
	}
}

// TestFanout: an instance that selects its namespaces, or lists more than
// binding.SmallGrant, binds with a bind slot; a few listed namespaces, or
// cluster-wide, without.
func TestFanout(t *testing.T) {
	many := make([]string, binding.SmallGrant+1)
	for _, tc := range []struct {
		name string
		spec oriav1alpha1.ScopeInstanceSpec
		want bool
	}{
		{"a selector", oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: &metav1.LabelSelector{}}, true},
		{"more than binding.SmallGrant listed", oriav1alpha1.ScopeInstanceSpec{Namespaces: many}, true},
		{"binding.SmallGrant listed", oriav1alpha1.ScopeInstanceSpec{Namespaces: many[:binding.SmallGrant]}, false},
		{"cluster-wide", oriav1alpha1.ScopeInstanceSpec{}, false},
	} {
		if got := fanout(tc.spec); got != tc.want {
			t.Errorf("%s: fanout = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestGatherFanoutWaitsForASlot: inside its window a fan-out gathers
// nothing until a bind slot is free (every slot is taken here: it gives up
// with its context).
func TestGatherFanoutWaitsForASlot(t *testing.T) {
	r := newReconciler(Deps{}, Options{MaxConcurrentReconciles: 1, Now: func() time.Time { return t0 }})
	r.binds <- struct{}{} // a fan-out in progress
	ctx, _ := withTurn(context.Background(), r.binds)
	ctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	si := &oriav1alpha1.ScopeInstance{Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: "t", NamespaceSelector: &metav1.LabelSelector{}}}
	if _, err := r.Gather(ctx, si); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Gather with every bind slot taken: %v, want to wait until the deadline", err)
	}
}
