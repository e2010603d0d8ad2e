package scopetemplate

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
)

func TestComputeStatus(t *testing.T) {
	tmpl := &oriav1alpha1.ScopeTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t", Generation: 3},
		Status: oriav1alpha1.ScopeTemplateStatus{ObservedGeneration: 2, ClusterRoles: []string{"old"}}}
	cond := func(s metav1.ConditionStatus, reason, msg string) []metav1.Condition {
		return []metav1.Condition{{Type: oriav1alpha1.TypeReady, Status: s, Reason: reason, Message: msg, ObservedGeneration: 3}}
	}
	used := &plan{instances: []string{"a", "b"}, roles: []string{"r1", "view"}, desired: make([]*rbacv1.ClusterRole, 1)}
	tests := []struct {
		name string
		p    *plan
		s    engine.Summary
		err  error
		want oriav1alpha1.ScopeTemplateStatus
	}{{
		name: "error: Unknown, observedGeneration and roles not advanced",
		err:  errors.New("boom"),
		want: oriav1alpha1.ScopeTemplateStatus{ObservedGeneration: 2, ClusterRoles: []string{"old"},
			Conditions: cond(metav1.ConditionUnknown, oriav1alpha1.ReasonReconcileError, "boom")},
	}, {
		name: "invalid spec is terminal: observed, roles kept",
		p:    &plan{instances: []string{"a"}, specErr: &binding.SpecError{Reason: oriav1alpha1.ReasonInvalidSpec, Message: "bad"}},
		want: oriav1alpha1.ScopeTemplateStatus{ObservedGeneration: 3, ClusterRoles: []string{"old"}, Instances: []string{"a"},
			Conditions: cond(metav1.ConditionFalse, oriav1alpha1.ReasonInvalidSpec, "bad")},
	}, {
		name: "unused",
		p:    &plan{roles: []string{"r1"}},
		want: oriav1alpha1.ScopeTemplateStatus{ObservedGeneration: 3, ClusterRoles: []string{"r1"},
			Conditions: cond(metav1.ConditionTrue, oriav1alpha1.ReasonValid, "valid; not used by any ScopeInstance, so its inline ClusterRoles do not exist")},
	}, {
		name: "used, inline roles in place",
		p:    used,
		want: oriav1alpha1.ScopeTemplateStatus{ObservedGeneration: 3, ClusterRoles: []string{"r1", "view"}, Instances: []string{"a", "b"},
			Conditions: cond(metav1.ConditionTrue, oriav1alpha1.ReasonValid, "valid; 1 inline ClusterRole(s) in place for 2 ScopeInstance(s)")},
	}, {
		name: "used, references only",
		p:    &plan{instances: []string{"a"}, roles: []string{"view"}},
		want: oriav1alpha1.ScopeTemplateStatus{ObservedGeneration: 3, ClusterRoles: []string{"view"}, Instances: []string{"a"},
			Conditions: cond(metav1.ConditionTrue, oriav1alpha1.ReasonValid, "valid; used by 1 ScopeInstance(s); it has no inline ClusterRoles")},
	}, {
		name: "a referenced ClusterRole does not exist",
		p:    &plan{instances: []string{"a"}, roles: []string{"viewer"}, missing: []string{"viewer"}},
		want: oriav1alpha1.ScopeTemplateStatus{ObservedGeneration: 3, ClusterRoles: []string{"viewer"}, Instances: []string{"a"},
			Conditions: cond(metav1.ConditionFalse, oriav1alpha1.ReasonClusterRoleNotFound,
				`ClusterRole(s) "viewer" do not exist: bindings to them grant nothing until they are created (oria looks again every 30s)`)},
	}, {
		name: "conflict",
		p:    used,
		s:    engine.Summary{Conflicts: []error{&engine.ConflictError{Kind: "ClusterRole", Name: "r1"}}},
		want: oriav1alpha1.ScopeTemplateStatus{ObservedGeneration: 3, ClusterRoles: []string{"r1", "view"}, Instances: []string{"a", "b"},
			Conditions: cond(metav1.ConditionFalse, oriav1alpha1.ReasonConflict,
				`ClusterRole "r1" exists and was not created by oria for this object; rename the role in the template or remove the other object`)},
	}, {
		name: "new inline rules held back for a ceiling: Progressing, naming the roles and the instances",
		p: &plan{instances: []string{"a", "b", "c"}, roles: []string{"r1", "r2"}, desired: make([]*rbacv1.ClusterRole, 2),
			held: map[string][]string{"r2": {"c"}, "r1": {"b", "c"}}},
		want: oriav1alpha1.ScopeTemplateStatus{ObservedGeneration: 3, ClusterRoles: []string{"r1", "r2"}, Instances: []string{"a", "b", "c"},
			Conditions: cond(metav1.ConditionFalse, oriav1alpha1.ReasonProgressing,
				`inline ClusterRole(s) "r1", "r2" keep their previous rules until the ServiceAccount ceiling of ScopeInstance(s) "b", "c" confirms the new rules `+
					`(or the instance removes its bindings of them); oria looks again every 2s`)},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := computeStatus(tmpl, tc.p, tc.s, tc.err)
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
				t.Errorf("computeStatus (-want +got):\n%s", diff)
			}
		})
	}
}
