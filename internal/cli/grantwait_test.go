package cli

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// TestGrantOutcome: grant waits while oria has not reported on the
// policy as created, or reports it Progressing; Bound is granted, another
// reason with something bound is granted in part, with nothing bound it is
// no grant.
func TestGrantOutcome(t *testing.T) {
	policy := func(gen, observed int64, status metav1.ConditionStatus, reason, scope string, count int32) *oriav1alpha1.RBACPolicy {
		p := &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Generation: gen}}
		p.Status.ObservedGeneration, p.Status.Scope, p.Status.BoundNamespaceCount = observed, scope, count
		if reason != "" {
			p.Status.Conditions = []metav1.Condition{{Type: oriav1alpha1.TypeReady, Status: status, Reason: reason, ObservedGeneration: observed}}
		}
		return p
	}
	for _, tc := range []struct {
		name string
		p    *oriav1alpha1.RBACPolicy
		want string
	}{
		{"no report yet", policy(1, 0, "", "", "", 0), ""},
		{"a report of an older generation", policy(2, 1, metav1.ConditionTrue, oriav1alpha1.ReasonBound, oriav1alpha1.ScopeNamespaces, 1), ""},
		{"progressing", policy(1, 1, metav1.ConditionFalse, oriav1alpha1.ReasonProgressing, "", 0), ""},
		{"bound", policy(1, 1, metav1.ConditionTrue, oriav1alpha1.ReasonBound, oriav1alpha1.ScopeNamespaces, 1), GrantBound},
		{"a cluster-scoped API left out", policy(1, 1, metav1.ConditionFalse, oriav1alpha1.ReasonClusterScopedAPI, oriav1alpha1.ScopeNamespaces, 1), GrantPartial},
		{"cluster-wide, in part", policy(1, 1, metav1.ConditionFalse, oriav1alpha1.ReasonBundleRoleTooBroad, oriav1alpha1.ScopeCluster, 0), GrantPartial},
		{"bound nowhere", policy(1, 1, metav1.ConditionFalse, oriav1alpha1.ReasonClusterScopedAPI, oriav1alpha1.ScopeNamespaces, 0), GrantNothing},
		{"the extension gone", policy(1, 1, metav1.ConditionFalse, oriav1alpha1.ReasonExtensionNotFound, "", 0), GrantNothing},
	} {
		if got := grantOutcome(tc.p, tc.p.Generation); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestWaitFlag(t *testing.T) {
	for in, want := range map[string]time.Duration{"true": DefaultWait, "false": 0, "0": 0, "2m": 2 * time.Minute, "0s": 0} {
		d := time.Hour
		if err := (waitFlag{&d}).Set(in); err != nil || d != want {
			t.Errorf("--wait=%s: %v, %v; want %v", in, d, err, want)
		}
	}
	for _, bad := range []string{"soon", "-1s"} {
		d := time.Hour
		if err := (waitFlag{&d}).Set(bad); err == nil {
			t.Errorf("--wait=%s: no error", bad)
		}
	}
}
