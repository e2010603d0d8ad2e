package rbacpolicy

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	policymodel "github.com/operator-framework/oria/internal/policy"
)

var t0 = time.Date(2025, 6, 6, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) *metav1.Time { return &metav1.Time{Time: t0.Add(d)} }

// TestComputeStatusWindow: a time-bound policy mirrors its instance's
// Pending and Expired, says how long is left when Bound, and says Expired,
// once past its expiresAt, even when it compiles to nothing.
func TestComputeStatusWindow(t *testing.T) {
	policy := &oriav1alpha1.RBACPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "devs", UID: "puid", Generation: 2},
		Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: "argocd", Access: oriav1alpha1.AccessView,
			Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "developers"}}, Namespaces: []string{"team-a"}, ExpiresAt: at(90 * time.Minute)},
	}
	compiled := policymodel.Compile(policy, []string{"applications.argoproj.io"})
	instance := func(ready metav1.ConditionStatus, reason, msg string, bound ...string) *oriav1alpha1.ScopeInstance {
		si := compiled.Instance.DeepCopy()
		si.Generation = 1
		si.Status = oriav1alpha1.ScopeInstanceStatus{Scope: oriav1alpha1.ScopeNamespaces, BoundNamespaces: bound, BoundNamespaceCount: int32(len(bound)),
			Conditions: []metav1.Condition{{Type: oriav1alpha1.TypeReady, Status: ready, Reason: reason, Message: msg, ObservedGeneration: 1}}}
		return si
	}
	judged := func(p *plan, w binding.Window) *plan {
		p.now, p.window = t0, w
		p.phase, _ = w.At(t0)
		return p
	}
	window := binding.PolicyWindow(policy.Spec)
	for _, tc := range []struct {
		name    string
		p       *plan
		out     result
		reason  string
		message string
	}{
		{"bound: with its end (an instant)", judged(&plan{decision: decisionApply, compiled: compiled}, window),
			result{instance: instance(metav1.ConditionTrue, oriav1alpha1.ReasonBound, "ok", "team-a")},
			oriav1alpha1.ReasonBound, "view access to applications.argoproj.io for 1 subject in 1 namespace, until 2025-06-06T13:30:00Z"},
		{"the instance is pending: mirrored", judged(&plan{decision: decisionApply, compiled: compiled}, window),
			result{instance: instance(metav1.ConditionFalse, oriav1alpha1.ReasonPending, "not yet")},
			oriav1alpha1.ReasonPending, `ScopeInstance "rbacpolicy-devs": not yet`},
		{"the instance expired: mirrored", judged(&plan{decision: decisionApply, compiled: compiled}, window),
			result{instance: instance(metav1.ConditionFalse, oriav1alpha1.ReasonExpired, "over")},
			oriav1alpha1.ReasonExpired, `ScopeInstance "rbacpolicy-devs": over`},
		{"nothing compiled, expired: Expired wins", judged(&plan{decision: decisionRevoke, reason: oriav1alpha1.ReasonExtensionNotFound, message: "no argocd"},
			binding.Window{ExpiresAt: at(-time.Minute)}), result{},
			oriav1alpha1.ReasonExpired, "the grant expired at 2025-06-06T11:59:00Z (spec.expiresAt): it grants nothing (also: ExtensionNotFound: no argocd)"},
		{"invalid mode, narrowed, expired: Expired, the mode does not matter", judged(&plan{decision: decisionNarrow, reason: oriav1alpha1.ReasonInvalidMode,
			message: "bad mode", narrowed: policymodel.Narrowed{Template: compiled.Template, Instance: compiled.Instance}}, binding.Window{ExpiresAt: at(-time.Minute)}),
			result{instance: instance(metav1.ConditionFalse, oriav1alpha1.ReasonExpired, "over")},
			oriav1alpha1.ReasonExpired, "the grant expired at 2025-06-06T11:59:00Z (spec.expiresAt): it grants nothing"},
		{"invalid mode, nothing in force, expired: Expired alone", judged(&plan{decision: decisionRevoke, reason: oriav1alpha1.ReasonInvalidMode, message: "bad mode"},
			binding.Window{ExpiresAt: at(-time.Minute)}), result{},
			oriav1alpha1.ReasonExpired, "the grant expired at 2025-06-06T11:59:00Z (spec.expiresAt): it grants nothing"},
		{"invalid mode, in force as asked: Bound, noting it", judged(&plan{decision: decisionApply, compiled: compiled, modeNote: "bad mode"}, window),
			result{instance: instance(metav1.ConditionTrue, oriav1alpha1.ReasonBound, "ok", "team-a")},
			oriav1alpha1.ReasonBound, "view access to applications.argoproj.io for 1 subject in 1 namespace, until 2025-06-06T13:30:00Z; bad mode"},
		{"invalid mode, the instance expired: no note", judged(&plan{decision: decisionApply, compiled: compiled, modeNote: "bad mode"}, window),
			result{instance: instance(metav1.ConditionFalse, oriav1alpha1.ReasonExpired, "over")},
			oriav1alpha1.ReasonExpired, `ScopeInstance "rbacpolicy-devs": over`},
		{"nothing compiled, not expired yet: the reason why", judged(&plan{decision: decisionRevoke, reason: oriav1alpha1.ReasonExtensionNotFound, message: "no argocd"},
			window), result{},
			oriav1alpha1.ReasonExtensionNotFound, "no argocd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := computeStatus(policy, tc.p, tc.out, nil)
			want := []metav1.Condition{{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionFalse, Reason: tc.reason, Message: tc.message, ObservedGeneration: 2}}
			if tc.reason == oriav1alpha1.ReasonBound {
				want[0].Status = metav1.ConditionTrue
			}
			if d := cmp.Diff(want, got.Conditions, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); d != "" {
				t.Errorf("conditions (-want +got):\n%s", d)
			}
		})
	}
}

// TestWindowRequeue: only a policy that compiles to nothing looks again,
// at its expiresAt; a compiled one follows its instance.
func TestWindowRequeue(t *testing.T) {
	r := newReconciler(Deps{}, Options{Now: func() time.Time { return t0 }})
	w := binding.Window{ExpiresAt: at(time.Hour)}
	for _, tc := range []struct {
		name string
		p    *plan
		want time.Duration
	}{
		{"revoked, expiring in an hour", &plan{decision: decisionRevoke, window: w, phase: binding.WindowOpen}, time.Hour},
		{"revoked, expired", &plan{decision: decisionRevoke, window: binding.Window{ExpiresAt: at(-time.Hour)}, phase: binding.WindowExpired}, 0},
		{"revoked, no end", &plan{decision: decisionRevoke, phase: binding.WindowOpen}, 0},
		{"compiled: its instance reports", &plan{decision: decisionApply, window: w, phase: binding.WindowOpen}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.windowRequeue(tc.p); got != tc.want {
				t.Errorf("windowRequeue = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestWindowThatNeverOpens (issue 40): a policy stored with a window that
// is empty in whole seconds (S.200 to S.800, admitted before the API server
// refused it) is not compiled and revokes what was: Pending until its
// expiresAt, looking again then, and Expired from then on; never an error
// retried for ever.
func TestWindowThatNeverOpens(t *testing.T) {
	policy := &oriav1alpha1.RBACPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "devs", UID: "puid", Generation: 2},
		Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: "argocd", Access: oriav1alpha1.AccessView,
			Subjects:  []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "developers"}},
			NotBefore: at(time.Hour + 200*time.Millisecond), ExpiresAt: at(time.Hour + 800*time.Millisecond)},
	}
	for _, tc := range []struct {
		name    string
		now     time.Time
		reason  string
		message string
		requeue time.Duration
	}{
		{"before: Pending, looking again at its expiresAt", t0, oriav1alpha1.ReasonPending,
			"spec.notBefore and spec.expiresAt leave no whole second between them: as oria applies them (notBefore rounded up, expiresAt down) " +
				"the window is from 2025-06-06T13:00:01Z until 2025-06-06T13:00:00Z, so it never opens and nothing is granted; Expired from spec.expiresAt on",
			time.Hour},
		{"after: Expired", t0.Add(time.Hour), oriav1alpha1.ReasonExpired,
			"the grant expired at 2025-06-06T13:00:00Z (spec.expiresAt): it grants nothing", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReconciler(Deps{}, Options{Now: func() time.Time { return tc.now }})
			p, err := r.Gather(t.Context(), policy)
			if err != nil {
				t.Fatal(err)
			}
			if p.decision != decisionRevoke || p.compiled.Instance != nil {
				t.Fatalf("decision %v, compiled %v: want a revocation, nothing compiled", p.decision, p.compiled.Instance)
			}
			got := computeStatus(policy, p, result{}, nil)
			want := []metav1.Condition{{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionFalse, Reason: tc.reason, Message: tc.message, ObservedGeneration: 2}}
			if d := cmp.Diff(want, got.Conditions, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); d != "" {
				t.Errorf("conditions (-want +got):\n%s", d)
			}
			if got := r.windowRequeue(p); got != tc.requeue {
				t.Errorf("windowRequeue = %v, want %v", got, tc.requeue)
			}
		})
	}
}
