package scopeinstance

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/publisher"
)

var t0 = time.Date(2025, 6, 6, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) *metav1.Time { return &metav1.Time{Time: t0.Add(d)} }

// closed is the plan of an instance outside its window at t0.
func closed(w binding.Window, cluster bool) *plan {
	phase, _ := w.At(t0)
	return &plan{now: t0, window: w, phase: phase, pins: map[string]string{"a": "uid-a"}, action: revokeAll, cluster: cluster}
}

// TestComputeStatusWindow: outside its window an instance reports Pending
// or Expired, binds nothing, whatever it bound before; inside, Bound says
// how long is left.
func TestComputeStatusWindow(t *testing.T) {
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "si", Generation: 3},
		Status: oriav1alpha1.ScopeInstanceStatus{ObservedGeneration: 2, Scope: oriav1alpha1.ScopeNamespaces, BoundNamespaces: []string{"a", "b"},
			BoundNamespaceCount: 2, PartiallyBoundNamespaceCount: 1}}
	cond := func(s metav1.ConditionStatus, reason, msg string) []metav1.Condition {
		return []metav1.Condition{{Type: oriav1alpha1.TypeReady, Status: s, Reason: reason, Message: msg, ObservedGeneration: 3}}
	}
	pub := &oriav1alpha1.PublicationStatus{ConfigMap: "ops/watched:namespaces"}
	for _, tc := range []struct {
		name string
		p    *plan
		res  result
		err  error
		want oriav1alpha1.ScopeInstanceStatus
	}{{
		name: "pending: nothing bound, the start and the end said",
		p:    closed(binding.Window{NotBefore: at(90 * time.Second), ExpiresAt: at(time.Hour)}, false),
		want: oriav1alpha1.ScopeInstanceStatus{ObservedGeneration: 3, Scope: oriav1alpha1.ScopeNamespaces, NamespaceUIDs: map[string]string{"a": "uid-a"},
			Conditions: cond(metav1.ConditionFalse, oriav1alpha1.ReasonPending,
				"the grant is time-bound, from 2025-06-06T12:01:30Z until 2025-06-06T13:00:00Z: nothing is bound before spec.notBefore")},
	}, {
		name: "expired, cluster-wide, with a publication",
		p:    closed(binding.Window{ExpiresAt: at(-time.Second)}, true),
		res:  result{published: publisher.Outcome{Status: pub}},
		want: oriav1alpha1.ScopeInstanceStatus{ObservedGeneration: 3, Scope: oriav1alpha1.ScopeCluster, NamespaceUIDs: map[string]string{"a": "uid-a"}, Publication: pub,
			Conditions: cond(metav1.ConditionFalse, oriav1alpha1.ReasonExpired,
				"the grant expired at 2025-06-06T11:59:59Z (spec.expiresAt): its bindings are deleted and it grants nothing; the object stays as the record of the grant (to grant again, move spec.expiresAt later, on its RBACPolicy if it is compiled from one)")},
	}, {
		name: "expired, but a deletion failed: an error, retried",
		p:    closed(binding.Window{ExpiresAt: at(-time.Second)}, false),
		err:  errors.New("deleting RoleBinding a/x: boom"),
		want: oriav1alpha1.ScopeInstanceStatus{ObservedGeneration: 3, Scope: oriav1alpha1.ScopeNamespaces, NamespaceUIDs: map[string]string{"a": "uid-a"},
			Conditions: cond(metav1.ConditionUnknown, oriav1alpha1.ReasonReconcileError, "deleting RoleBinding a/x: boom")},
	}, {
		name: "open: Bound, with its end (an instant)",
		p:    &plan{now: t0, window: binding.Window{ExpiresAt: at(3 * time.Hour)}, phase: binding.WindowOpen, roles: []string{"view"}, template: &oriav1alpha1.ScopeTemplate{}, targets: binding.Targets{Namespaces: []string{"a"}}},
		res:  result{bound: []string{"a"}},
		want: oriav1alpha1.ScopeInstanceStatus{ObservedGeneration: 3, Scope: oriav1alpha1.ScopeNamespaces, BoundNamespaces: []string{"a"}, BoundNamespaceCount: 1,
			Conditions: cond(metav1.ConditionTrue, oriav1alpha1.ReasonBound, "1 ClusterRole(s) bound in 1 namespace(s), until 2025-06-06T15:00:00Z")},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := computeStatus(si, tc.p, tc.res, tc.err)
			if d := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); d != "" {
				t.Errorf("computeStatus (-want +got):\n%s", d)
			}
		})
	}
}

func TestWindowEvent(t *testing.T) {
	ready := func(reason string) *metav1.Condition {
		return &metav1.Condition{Type: oriav1alpha1.TypeReady, Reason: reason}
	}
	open := binding.Window{NotBefore: at(-time.Minute), ExpiresAt: at(time.Hour)}
	lead := 15 * time.Minute
	for _, tc := range []struct {
		name    string
		w       binding.Window
		prev    *metav1.Condition
		deleted int
		want    string
	}{
		{"no window: never", binding.Window{}, nil, 0, ""},
		{"created inside its window", open, nil, 0, EventAccessGranted},
		{"the window opens", open, ready(oriav1alpha1.ReasonPending), 0, EventAccessGranted},
		{"an expired grant extended", open, ready(oriav1alpha1.ReasonExpired), 0, EventAccessGranted},
		{"already granted, far from the end", open, ready(oriav1alpha1.ReasonBound), 0, ""},
		{"already granted, a problem meanwhile", open, ready(oriav1alpha1.ReasonNamespaceNotFound), 0, ""},
		{"within the warning", binding.Window{ExpiresAt: at(lead)}, ready(oriav1alpha1.ReasonBound), 0, EventAccessExpiring},
		{"pending", binding.Window{NotBefore: at(time.Minute)}, nil, 0, ""},
		{"just expired", binding.Window{ExpiresAt: at(0)}, ready(oriav1alpha1.ReasonBound), 2, EventAccessExpired},
		{"expired while oria was down: the status still says Bound", binding.Window{ExpiresAt: at(-time.Hour)}, ready(oriav1alpha1.ReasonBound), 0, EventAccessExpired},
		{"expired before", binding.Window{ExpiresAt: at(-time.Hour)}, ready(oriav1alpha1.ReasonExpired), 0, ""},
		{"created expired: never granted", binding.Window{ExpiresAt: at(-time.Hour)}, nil, 0, ""},
		{"created expired, yet bindings existed", binding.Window{ExpiresAt: at(-time.Hour)}, nil, 1, EventAccessExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			phase, _ := tc.w.At(t0)
			if got := windowEvent(tc.w, phase, t0, tc.prev, lead, tc.deleted); got != tc.want {
				t.Errorf("windowEvent = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestPostponesStatus: the reconcile at its window's instant that changed
// access leaves its status to the next one, so that every grant changing at
// that instant makes its access-changing writes first; nothing is
// postponed after an error, without a write, before the window, or past postponeSpan.
func TestPostponesStatus(t *testing.T) {
	wrote := result{summary: engine.Summarize([]engine.Outcome{{Namespace: "a", Name: "b", Action: engine.Deleted}})}
	unchanged := result{summary: engine.Summarize([]engine.Outcome{{Namespace: "a", Name: "b", Action: engine.Unchanged}})}
	planAt := func(w binding.Window, now time.Duration) *plan {
		phase, _ := w.At(t0.Add(now))
		return &plan{now: t0.Add(now), window: w, phase: phase}
	}
	expiring := binding.Window{ExpiresAt: at(0)}
	opening := binding.Window{NotBefore: at(0), ExpiresAt: at(time.Hour)}
	for _, tc := range []struct {
		name string
		p    *plan
		res  result
		err  error
		want bool
	}{
		{"revoked at expiresAt", planAt(expiring, 0), wrote, nil, true},
		{"revoked just before postponeSpan", planAt(expiring, postponeSpan-time.Millisecond), wrote, nil, true},
		{"revoked at postponeSpan", planAt(expiring, postponeSpan), wrote, nil, false},
		{"bound after notBefore", planAt(opening, 300*time.Millisecond), wrote, nil, true},
		{"nothing written", planAt(expiring, 0), unchanged, nil, false},
		{"an error", planAt(expiring, 0), wrote, errors.New("the API server is unavailable"), false},
		{"before the window", planAt(opening, -time.Millisecond), wrote, nil, false},
		{"open without notBefore", planAt(binding.Window{ExpiresAt: at(time.Hour)}, 0), wrote, nil, false},
		{"no window", planAt(binding.Window{}, 0), wrote, nil, false},
		{"no plan", nil, wrote, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := postponesStatus(tc.p, tc.res, tc.err); got != tc.want {
				t.Errorf("postponesStatus = %v, want %v", got, tc.want)
			}
		})
	}
	// A postponed status is the status as it was.
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "si", Generation: 2}, Status: oriav1alpha1.ScopeInstanceStatus{ObservedGeneration: 1,
		BoundNamespaces: []string{"a"}, BoundNamespaceCount: 1, Conditions: []metav1.Condition{{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionTrue, Reason: oriav1alpha1.ReasonBound}}}}
	p := planAt(expiring, 0)
	p.action = revokeAll
	if d := cmp.Diff(si.Status, computeStatus(si, p, wrote, nil)); d != "" {
		t.Errorf("a postponed status changed (-was +now):\n%s", d)
	}
	if got := computeStatus(si, planAt(expiring, postponeSpan), wrote, nil); meta.FindStatusCondition(got.Conditions, oriav1alpha1.TypeReady).Reason != oriav1alpha1.ReasonExpired {
		t.Errorf("past postponeSpan the status says %+v, want Expired", got.Conditions)
	}
}
