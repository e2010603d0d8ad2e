package reconciler

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

func TestWarnOnTransition(t *testing.T) {
	ready := func(s metav1.ConditionStatus, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: oriav1alpha1.TypeReady, Status: s, Reason: reason, Message: reason + " message"}}
	}
	for _, tc := range []struct {
		name          string
		before, after []metav1.Condition
		hold          time.Duration
		err           error
		want          string
	}{
		{name: "first status, a problem", after: ready(metav1.ConditionFalse, "NamespaceNotFound"), want: "Warning NamespaceNotFound NamespaceNotFound message"},
		{name: "from Bound into a problem", before: ready(metav1.ConditionTrue, "Bound"), after: ready(metav1.ConditionFalse, "Forbidden"), want: "Warning Forbidden Forbidden message"},
		{name: "from one problem into another", before: ready(metav1.ConditionFalse, "Forbidden"), after: ready(metav1.ConditionFalse, "ClusterRoleNotFound"), want: "Warning ClusterRoleNotFound ClusterRoleNotFound message"},
		{name: "into an internal error", before: ready(metav1.ConditionTrue, "Bound"), after: ready(metav1.ConditionUnknown, "ReconcileError"), want: "Warning ReconcileError ReconcileError message"},
		{name: "the same problem again", before: ready(metav1.ConditionFalse, "Forbidden"), after: ready(metav1.ConditionFalse, "Forbidden")},
		{name: "Progressing", after: ready(metav1.ConditionFalse, "Progressing")},
		{name: "Conflict is warned about where it is found", after: ready(metav1.ConditionFalse, "Conflict")},
		{name: "a time-bound grant not started yet", after: ready(metav1.ConditionFalse, "Pending")},
		{name: "a time-bound grant that ended: terminal, not trouble", before: ready(metav1.ConditionTrue, "Bound"), after: ready(metav1.ConditionFalse, "Expired")},
		{name: "Ready", before: ready(metav1.ConditionFalse, "Forbidden"), after: ready(metav1.ConditionTrue, "Bound")},
		{name: "the write failed", after: ready(metav1.ConditionFalse, "Forbidden"), err: errors.New("boom")},
		{name: "the write was held back", after: ready(metav1.ConditionFalse, "Forbidden"), hold: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(10)
			patch := WarnOnTransition(&Warnings{}, rec, func(o *oriav1alpha1.ScopeInstance) []metav1.Condition { return o.Status.Conditions },
				func(context.Context, *oriav1alpha1.ScopeInstance, *oriav1alpha1.ScopeInstance) (time.Duration, error) {
					return tc.hold, tc.err
				})
			before := &oriav1alpha1.ScopeInstance{Status: oriav1alpha1.ScopeInstanceStatus{Conditions: tc.before}}
			after := &oriav1alpha1.ScopeInstance{Status: oriav1alpha1.ScopeInstanceStatus{Conditions: tc.after}}
			_, _ = patch(context.Background(), before, after)
			var got string
			select {
			case got = <-rec.Events:
			default:
			}
			if got != tc.want {
				t.Errorf("event %q, want %q", got, tc.want)
			}
			if len(rec.Events) > 0 {
				t.Errorf("%d more events", len(rec.Events))
			}
		})
	}
}

// TestWarnOnTransitionStaleCache: a second reconcile that sees the same
// transition (its cache did not show the first status yet) records nothing
// more; once Ready, a new problem is recorded again.
func TestWarnOnTransitionStaleCache(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	patch := WarnOnTransition(&Warnings{}, rec, func(o *oriav1alpha1.ScopeInstance) []metav1.Condition { return o.Status.Conditions },
		func(context.Context, *oriav1alpha1.ScopeInstance, *oriav1alpha1.ScopeInstance) (time.Duration, error) {
			return 0, nil
		})
	obj := func(conds ...metav1.Condition) *oriav1alpha1.ScopeInstance {
		si := &oriav1alpha1.ScopeInstance{Status: oriav1alpha1.ScopeInstanceStatus{Conditions: conds}}
		si.UID = "uid-1"
		return si
	}
	bad := metav1.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionFalse, Reason: "NamespaceNotFound"}
	good := metav1.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionTrue, Reason: "Bound"}
	for _, step := range []struct {
		before, after *oriav1alpha1.ScopeInstance
		events        int
	}{
		{obj(), obj(bad), 1},
		{obj(), obj(bad), 0}, // the stale cache's second look
		{obj(bad), obj(good), 0},
		{obj(good), obj(bad), 1},
	} {
		_, _ = patch(context.Background(), step.before, step.after)
		if len(rec.Events) != step.events {
			t.Fatalf("%d events, want %d", len(rec.Events), step.events)
		}
		for len(rec.Events) > 0 {
			<-rec.Events
		}
	}
}
