package metrics

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

func TestRequests(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	req := func(st oriav1alpha1.RequestState, age time.Duration, approvedAfter time.Duration) oriav1alpha1.AccessRequest {
		r := oriav1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.Time{Time: now.Add(-age)}}}
		r.Status.State = st
		if approvedAfter > 0 {
			r.Status.ApprovedBy, r.Status.StartsAt = "bob", &metav1.Time{Time: now.Add(-age + approvedAfter)}
		}
		return r
	}
	s := Requests([]oriav1alpha1.AccessRequest{
		req("", time.Minute, 0), req(oriav1alpha1.StateRequested, time.Hour, 0),
		req(oriav1alpha1.StateActive, 10*time.Minute, 2*time.Minute), req(oriav1alpha1.StateEnded, 2*time.Hour, 30*time.Second),
		req(oriav1alpha1.StateDenied, time.Hour, 0),
	}, now)
	if s.ByState[oriav1alpha1.StateRequested] != 2 || s.ByState[oriav1alpha1.StateActive] != 1 || s.ByState[oriav1alpha1.StateEnded] != 1 || s.ByState[oriav1alpha1.StateDenied] != 1 {
		t.Fatalf("by state: %v", s.ByState)
	}
	if s.OldestPending == nil || *s.OldestPending != time.Hour {
		t.Fatalf("oldest pending: %v", s.OldestPending)
	}
	if len(s.Approvals) != 2 || s.Approvals[0] != 120 || s.Approvals[1] != 30 {
		t.Fatalf("approvals: %v", s.Approvals)
	}
	if b := buckets(s.Approvals); b[60] != 1 || b[300] != 2 {
		t.Fatalf("buckets: %v", b)
	}
	if s := Requests(nil, now); s.OldestPending != nil {
		t.Fatal("no pending request: no oldest")
	}
}
