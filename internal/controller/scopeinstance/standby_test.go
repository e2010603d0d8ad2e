package scopeinstance

import (
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
)

// standbyGrants picks what of a closed instance still grants: a gate with
// rules (then not its bindings), every other binding, and the bindings of
// a gate name no gate of this instance's holds.
func TestStandbyGrants(t *testing.T) {
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "grant", UID: "u1"}}
	filled := binding.GateRole(si, []binding.GateSource{{Name: "view", Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, Resources: []string{"pods"}, APIGroups: []string{""}}}}}, true)
	empty := binding.GateRole(si, []binding.GateSource{{Name: "view"}}, false)
	aggregated := empty.DeepCopy()
	aggregated.AggregationRule = &rbacv1.AggregationRule{}
	squatted := filled.DeepCopy()
	squatted.OwnerReferences[0].UID = "someone-else"
	rb := func(role string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b-" + role, Namespace: "ns"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: role}}
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "c"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}}
	gateName := filled.Name
	rbs := []*rbacv1.RoleBinding{rb(gateName), rb("view")}
	for _, c := range []struct {
		name     string
		gate     *rbacv1.ClusterRole
		wantGate bool
		wantRBs  []string
		wantCRBs int
	}{
		{"a filled gate is emptied; its bindings then grant nothing", filled, true, []string{"b-view"}, 1},
		{"an empty gate: only the other bindings", empty, false, []string{"b-view"}, 1},
		{"an aggregation rule is emptied", aggregated, true, []string{"b-view"}, 1},
		{"no gate: its bindings go", nil, false, []string{"b-" + gateName, "b-view"}, 1},
		{"someone else's role under the gate's name: its bindings go", squatted, false, []string{"b-" + gateName, "b-view"}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			gate, got := standbyGrants(si, c.gate, binding.Set{RoleBindings: rbs, ClusterRoleBindings: []*rbacv1.ClusterRoleBinding{crb}})
			gotRBs, gotCRBs := got.RoleBindings, got.ClusterRoleBindings
			if (gate != nil) != c.wantGate {
				t.Errorf("gate to empty: %v, want %v", gate != nil, c.wantGate)
			}
			var names []string
			for _, b := range gotRBs {
				names = append(names, b.Name)
			}
			if len(names) != len(c.wantRBs) || (len(names) > 0 && (names[0] != c.wantRBs[0] || names[len(names)-1] != c.wantRBs[len(c.wantRBs)-1])) {
				t.Errorf("RoleBindings to delete: %v, want %v", names, c.wantRBs)
			}
			if len(gotCRBs) != c.wantCRBs {
				t.Errorf("ClusterRoleBindings to delete: %d, want %d", len(gotCRBs), c.wantCRBs)
			}
		})
	}
}

// lookAt: a closed window is looked at StandbyGrace from now, an open one
// StandbyGrace after its expiresAt, one without an end never.
func TestStandbyLookAt(t *testing.T) {
	s := NewStandby(Deps{}, nil, nil, func() time.Time { return t0 }, 0)
	for _, c := range []struct {
		name string
		spec oriav1alpha1.ScopeInstanceSpec
		want time.Time
	}{
		{"expired", oriav1alpha1.ScopeInstanceSpec{ExpiresAt: at(-time.Minute)}, t0.Add(StandbyGrace)},
		{"pending", oriav1alpha1.ScopeInstanceSpec{NotBefore: at(time.Minute)}, t0.Add(StandbyGrace)},
		{"open until", oriav1alpha1.ScopeInstanceSpec{ExpiresAt: at(time.Hour)}, t0.Add(time.Hour + StandbyGrace)},
		{"open for good", oriav1alpha1.ScopeInstanceSpec{}, time.Time{}},
	} {
		if got := s.lookAt(&oriav1alpha1.ScopeInstance{Spec: c.spec}); !got.Equal(c.want) {
			t.Errorf("%s: looks at %v, want %v", c.name, got, c.want)
		}
	}
}
