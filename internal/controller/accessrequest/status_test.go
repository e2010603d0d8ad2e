package accessrequest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/eligibility"
	policymodel "github.com/operator-framework/oria/internal/policy"
)

func TestComputeStatus(t *testing.T) {
	start := metav1.NewTime(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	end := metav1.NewTime(start.Add(10 * time.Minute))
	active := eligibility.Assessment{State: oriav1alpha1.StateActive, Reason: oriav1alpha1.ReasonApproved, Message: "approved by \"bob\"",
		ApprovedBy: "bob", Start: &start, End: &end, Namespaces: []string{"team-a"}}
	compiled := policymodel.Compiled{Template: &oriav1alpha1.ScopeTemplate{}, Instance: &oriav1alpha1.ScopeInstance{}}
	bound := &oriav1alpha1.ScopeInstance{Status: oriav1alpha1.ScopeInstanceStatus{Conditions: []metav1.Condition{
		{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionTrue, Reason: oriav1alpha1.ReasonBound}}}}
	for _, tc := range []struct {
		name   string
		p      *plan
		out    result
		err    error
		status metav1.ConditionStatus
		reason string
		state  oriav1alpha1.RequestState
	}{
		{name: "gather failed", err: errors.New("boom"), status: metav1.ConditionUnknown, reason: oriav1alpha1.ReasonReconcileError},
		{name: "pending", p: &plan{assessment: eligibility.Assessment{State: oriav1alpha1.StateRequested, Reason: oriav1alpha1.ReasonRequested}},
			status: metav1.ConditionFalse, reason: oriav1alpha1.ReasonRequested, state: oriav1alpha1.StateRequested},
		{name: "active, being bound", p: &plan{assessment: active, compiled: compiled}, status: metav1.ConditionFalse, reason: oriav1alpha1.ReasonApproved,
			state: oriav1alpha1.StateActive},
		{name: "active, bound", p: &plan{assessment: active, compiled: compiled}, out: result{instance: bound}, status: metav1.ConditionTrue,
			reason: oriav1alpha1.ReasonBound, state: oriav1alpha1.StateActive},
		{name: "active, no API", p: &plan{assessment: active}, status: metav1.ConditionFalse, reason: oriav1alpha1.ReasonAPINotFound, state: oriav1alpha1.StateActive},
		{name: "active, conflict", p: &plan{assessment: active, compiled: compiled}, out: result{conflict: "taken"}, status: metav1.ConditionFalse,
			reason: oriav1alpha1.ReasonConflict, state: oriav1alpha1.StateActive},
		{name: "ended", p: &plan{assessment: eligibility.Assessment{State: oriav1alpha1.StateEnded, Reason: oriav1alpha1.ReasonEnded, EndedBy: "oria", Start: &start, End: &end}},
			status: metav1.ConditionFalse, reason: oriav1alpha1.ReasonEnded, state: oriav1alpha1.StateEnded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ar := &oriav1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: "r", Generation: 1}}
			st := computeStatus(ar, tc.p, tc.out, tc.err)
			c := meta.FindStatusCondition(st.Conditions, oriav1alpha1.TypeActive)
			if c == nil || c.Status != tc.status || c.Reason != tc.reason || st.State != tc.state {
				t.Fatalf("got %+v, state %q; want %s %s, state %q", c, st.State, tc.status, tc.reason, tc.state)
			}
			if tc.state == oriav1alpha1.StateActive && (st.ApprovedBy != "bob" || !st.EndsAt.Equal(&end) || strings.Join(st.Namespaces, ",") != "team-a") {
				t.Fatalf("the active status does not say who, until when, where: %+v", st)
			}
			if tc.state != oriav1alpha1.StateActive && len(st.Namespaces) > 0 {
				t.Fatalf("namespaces of a request not in force: %v", st.Namespaces)
			}
		})
	}
}

func TestTransitionNamesWho(t *testing.T) {
	ar := &oriav1alpha1.AccessRequest{Spec: oriav1alpha1.AccessRequestSpec{PolicyName: "p", Requester: "alice", Namespaces: []string{"team-a"},
		Duration: metav1.Duration{Duration: 10 * time.Minute}, Reason: "INC-1"}}
	ar.Annotations = eligibility.Approval.Set(nil, eligibility.Approval.Of(map[string]string{oriav1alpha1.AnnotationApprovedBy: "bob"}))
	ar.Status.State = oriav1alpha1.StateActive
	if reason, note := transition(ar); reason != oriav1alpha1.ReasonApproved || !strings.Contains(note, `approved by "bob"`) || !strings.Contains(note, `"alice"`) {
		t.Fatalf("%s: %s", reason, note)
	}
	ar.Status.State, ar.Status.EndedBy = oriav1alpha1.StateEnded, "alice"
	if reason, note := transition(ar); reason != oriav1alpha1.ReasonEnded || !strings.Contains(note, `by "alice"`) {
		t.Fatalf("%s: %s", reason, note)
	}
	ar.Status.State = oriav1alpha1.StateRequested
	if _, note := transition(ar); !strings.Contains(note, "INC-1") {
		t.Fatalf("requested: %s", note)
	}
}
