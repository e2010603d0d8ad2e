package scopeinstance

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/publisher"
)

// withBound sets res.bound as write does, from the outcomes of the intended
// bindings (here all of res.summary).
func withBound(instance string, p *plan, res result) result {
	if p != nil && p.action == bindAll {
		if p.unbound == nil && !p.targets.Cluster {
			p.unbound = unboundNamespaces(instance, p.targets.Namespaces, append(slices.Clip(p.pending), p.ahead...), p.existing)
		}
		// The namespaces the summary says are bad failed their write.
		var failed []engine.Outcome
		for ns := range res.summary.Bad {
			failed = append(failed, engine.Outcome{Namespace: ns, Action: engine.Failed, Err: errors.New("failed")})
		}
		_, res.bound, _ = reach(p, engine.SetOutcome{{Kind: "RoleBinding", Namespaced: true, Outcomes: failed}}, nil)
	}
	return res
}

func TestComputeStatus(t *testing.T) {
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "si", Generation: 5},
		Status: oriav1alpha1.ScopeInstanceStatus{ObservedGeneration: 4, Scope: oriav1alpha1.ScopeNamespaces, BoundNamespaces: []string{"old"}, BoundNamespaceCount: 1}}
	tmpl := &oriav1alpha1.ScopeTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}}
	cond := func(s metav1.ConditionStatus, reason, msg string) []metav1.Condition {
		return []metav1.Condition{{Type: oriav1alpha1.TypeReady, Status: s, Reason: reason, Message: msg, ObservedGeneration: 5}}
	}
	ns := func(names ...string) binding.Targets { return binding.Targets{Namespaces: names} }
	// A binding of the pending role "inline" kept from before in namespace a.
	keptInA := []*rbacv1.RoleBinding{{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: binding.BindingName("si", "inline")}}}
	summary := func(bad ...string) engine.Summary {
		s := engine.Summarize()
		for _, b := range bad {
			s.Bad[b] = true
		}
		return s
	}
	tests := []struct {
		name string
		p    *plan
		res  result
		err  error
		want oriav1alpha1.ScopeInstanceStatus
	}{{
		name: "gathering failed: Unknown, nothing else changes",
		err:  errors.New("cache not synced"),
		want: oriav1alpha1.ScopeInstanceStatus{ObservedGeneration: 4, Scope: oriav1alpha1.ScopeNamespaces, BoundNamespaces: []string{"old"}, BoundNamespaceCount: 1,
			Conditions: cond(metav1.ConditionUnknown, oriav1alpha1.ReasonReconcileError, "cache not synced")},
	}, {
		name: "spec error: terminal, bound namespaces kept",
		p:    &plan{action: revokeOnly, specErr: &binding.SpecError{Reason: oriav1alpha1.ReasonTemplateNotFound, Message: "no template"}},
		want: oriav1alpha1.ScopeInstanceStatus{ObservedGeneration: 5, Scope: oriav1alpha1.ScopeNamespaces, BoundNamespaces: []string{"old"}, BoundNamespaceCount: 1,
			Conditions: cond(metav1.ConditionFalse, oriav1alpha1.ReasonTemplateNotFound, "no template")},
	}, {
		name: "bound in namespaces",
		p:    &plan{template: tmpl, roles: []string{"view"}, targets: ns("a", "b")},
		res:  result{summary: summary()},
		want: oriav1alpha1.ScopeInstanceStatus{ObservedGeneration: 5, Scope: oriav1alpha1.ScopeNamespaces, BoundNamespaces: []string{"a", "b"}, BoundNamespaceCount: 2,
			Conditions: cond(metav1.ConditionTrue, oriav1alpha1.ReasonBound, "1 ClusterRole(s) bound in 2 namespace(s)")},
	}, {
		name: "published: the publication status is reported",
		p:    &plan{template: tmpl, roles: []string{"view"}, targets: ns("a")},
		res:  result{summary: summary(), published: publisher.Outcome{Status: &oriav1alpha1.PublicationStatus{ConfigMap: "op/scope:namespaces", Namespaces: 2, Hash: "h"}}},
		want: oriav1alpha1.ScopeInstanceStatus{ObservedGeneration: 5, Scope: oriav1alpha1.ScopeNamespaces, BoundNamespaces: []string{"a"}, BoundNamespaceCount: 1,
			Publication: &oriav1alpha1.PublicationStatus{ConfigMap: "op/scope:namespaces", Namespaces: 2, Hash: "h"},
			Conditions:  cond(metav1.ConditionTrue, oriav1alpha1.ReasonBound, "1 ClusterRole(s) bound in 1 namespace(s)")},
	}, {
		name: "a foreign ConfigMap key: Conflict, the bindings are reported in place",
		p:    &plan{template: tmpl, roles: []string{"view"}, targets: ns("a")},
		res:  result{summary: summary(), published: publisher.Outcome{Conflict: `key "namespaces" of ConfigMap op/scope is managed by someone else (x)`}},
		want: oriav1alpha1.ScopeInstanceStatus{ObservedGeneration: 5, Scope: oriav1alpha1.ScopeNamespaces, BoundNamespaces: []string{"a"}, BoundNamespaceCount: 1,
			Conditions: cond(metav1.ConditionFalse, oriav1alpha1.ReasonConflict,
				`1 ClusterRole(s) bound in 1 namespace(s), but spec.publication: key "namespaces" of ConfigMap op/scope is managed by someone else (x); oria leaves it as it is and looks again every 30s`)},
	}, {
		name: "a selector that matches nothing yet says so",
		p:    &plan{template: tmpl, roles: []string{"view"}},
		res:  result{summary: summary()},
		want: oriav1alpha1.ScopeInstanceStatus{ObservedGeneration: 5, Scope: oriav1alpha1.ScopeNamespaces,
			Conditions: cond(metav1.ConditionTrue, oriav1alpha1.ReasonBound, "1 ClusterRole(s) bound in 0 namespaces: no namespace matches yet; namespaces are bound as soon as they match")},
	}, {
		name: "the template references a ClusterRole that does not exist",
		p: &plan{template: &oriav1alpha1.ScopeTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}, Status: oriav1alpha1.ScopeTemplateStatus{
			Conditions: []metav1.Condition{{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionFalse, Reason: oriav1alpha1.ReasonClusterRoleNotFound, Message: `ClusterRole(s) "viewer" do not exist`}},
		}}, roles: []string{"viewer"}, targets: ns("a")},
		res: result{summary: summary()},
		want: oriav1alpha1.ScopeInstanceStatus{ObservedGeneration: 5, Scope: oriav1alpha1.ScopeNamespaces, BoundNamespaces: []string{"a"}, BoundNamespaceCount: 1,
			Conditions: cond(metav1.ConditionFalse, oriav1alpha1.ReasonClusterRoleNotFound, `1 ClusterRole(s) bound in 1 namespace(s), but ScopeTemplate "t": ClusterRole(s) "viewer" do not exist`)},
	}, {
		name: "cluster-wide",
		p:    &plan{template: tmpl, roles: []string{"view", "edit"}, cluster: true, targets: binding.Targets{Cluster: true}},
		res:  result{summary: summary()},
		want: oriav1alpha1.ScopeInstanceStatus{ObservedGeneration: 5, Scope: oriav1alpha1.ScopeCluster,
			Conditions: cond(metav1.ConditionTrue, oriav1alpha1.ReasonBound, "2 ClusterRole(s) bound cluster-wide")},
	}, {
		name: "a failed namespace is not bound, and the write error is Unknown",
		p:    &plan{template: tmpl, roles: []string{"view"}, targets: ns("a", "b")},
		res:  result{summary: summary("b")},
		err:  errors.New("forbidden in b"),
		want: oriav1alpha1.ScopeInstanceStatus{ObservedGeneration: 5, Scope: oriav1alpha1.ScopeNamespaces, BoundNamespaces: []string{"a"}, BoundNamespaceCount: 1,
			Conditions: cond(metav1.ConditionUnknown, oriav1alpha1.ReasonReconcileError, "forbidden in b")},
	}, {
		name: "conflict",
		p:    &plan{template: tmpl, roles: []string{"view"}, targets: ns("a", "b")},
		res: result{summary: engine.Summarize([]engine.Outcome{{Namespace: "b", Name: "x", Action: engine.Conflict, Err: errors.New(`RoleBinding "x" in namespace "b" exists`)}}),
			done: true},
		want: oriav1alpha1.ScopeInstanceStatus{ObservedGeneration: 5, Scope: oriav1alpha1.ScopeNamespaces, BoundNamespaces: []string{"a"}, BoundNamespaceCount: 1,
			Conditions: cond(metav1.ConditionFalse, oriav1alpha1.ReasonConflict, `RoleBinding "x" in namespace "b" exists; oria leaves such objects alone: remove or rename them`)},
	}, {
		name: "missing namespace",
		p:    &plan{template: tmpl, roles: []string{"view"}, targets: binding.Targets{Namespaces: []string{"a"}, Missing: []string{"later"}}},
		res:  result{summary: summary()},
		want: oriav1alpha1.ScopeInstanceStatus{ObservedGeneration: 5, Scope: oriav1alpha1.ScopeNamespaces, BoundNamespaces: []string{"a"}, BoundNamespaceCount: 1,
			Conditions: cond(metav1.ConditionFalse, oriav1alpha1.ReasonNamespaceNotFound, "namespace(s) later do not exist; they are bound as soon as they are created (bound in 1 other namespace(s))")},
	}, {
		name: "pending inline role: only namespaces that still have its binding count as bound",
		p:    &plan{template: tmpl, roles: []string{"view"}, pending: []string{"inline"}, targets: ns("a", "b"), existing: binding.Set{RoleBindings: keptInA}},
		res:  result{summary: summary()},
		want: oriav1alpha1.ScopeInstanceStatus{ObservedGeneration: 5, Scope: oriav1alpha1.ScopeNamespaces, BoundNamespaces: []string{"a"}, BoundNamespaceCount: 1,
			Conditions: cond(metav1.ConditionFalse, oriav1alpha1.ReasonProgressing, "waiting for the ScopeTemplate controller to create ClusterRole(s) inline")},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := computeStatus(si, tc.p, withBound(si.Name, tc.p, tc.res), tc.err)
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
				t.Errorf("computeStatus (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRoutineChange: only a Bound instance's count of bound namespaces may
// wait for the status spacing; a change of anything that says whether or
// why a grant holds is written at once.
func TestRoutineChange(t *testing.T) {
	at := metav1.NewTime(time.Unix(1000, 0))
	ready := func(s metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: oriav1alpha1.TypeReady, Status: s, Reason: reason, Message: msg, ObservedGeneration: 2, LastTransitionTime: at}
	}
	bound := func(nss ...string) oriav1alpha1.ScopeInstanceStatus {
		return oriav1alpha1.ScopeInstanceStatus{ObservedGeneration: 2, Scope: oriav1alpha1.ScopeNamespaces, BoundNamespaces: nss, BoundNamespaceCount: int32(len(nss)),
			Conditions: []metav1.Condition{ready(metav1.ConditionTrue, oriav1alpha1.ReasonBound, fmt.Sprintf("1 ClusterRole(s) bound in %d namespace(s)", len(nss)))}}
	}
	with := func(st oriav1alpha1.ScopeInstanceStatus, change func(*oriav1alpha1.ScopeInstanceStatus)) oriav1alpha1.ScopeInstanceStatus {
		st = *st.DeepCopy()
		change(&st)
		return st
	}
	tests := []struct {
		name          string
		before, after oriav1alpha1.ScopeInstanceStatus
		want          bool
	}{
		{"a namespace more, still Bound", bound("a"), bound("a", "b"), true},
		{"a namespace less, still Bound", bound("a", "b"), bound("a"), true},
		{"first status", oriav1alpha1.ScopeInstanceStatus{}, bound("a"), false},
		{"no longer Bound", bound("a"), with(bound("a"), func(st *oriav1alpha1.ScopeInstanceStatus) {
			st.Conditions = []metav1.Condition{ready(metav1.ConditionFalse, oriav1alpha1.ReasonConflict, "x")}
		}), false},
		{"Bound again", with(bound("a"), func(st *oriav1alpha1.ScopeInstanceStatus) {
			st.Conditions = []metav1.Condition{ready(metav1.ConditionFalse, oriav1alpha1.ReasonNamespaceNotFound, "b")}
		}), bound("a", "b"), false},
		{"counting while not Bound", with(bound("a"), func(st *oriav1alpha1.ScopeInstanceStatus) {
			st.Conditions = []metav1.Condition{ready(metav1.ConditionFalse, oriav1alpha1.ReasonNamespaceNotFound, "1")}
		}), with(bound("a", "b"), func(st *oriav1alpha1.ScopeInstanceStatus) {
			st.Conditions = []metav1.Condition{ready(metav1.ConditionFalse, oriav1alpha1.ReasonNamespaceNotFound, "2")}
		}), false},
		{"new generation", bound("a"), with(bound("a", "b"), func(st *oriav1alpha1.ScopeInstanceStatus) { st.ObservedGeneration = 3 }), false},
		{"condition of a new generation", bound("a"), with(bound("a", "b"), func(st *oriav1alpha1.ScopeInstanceStatus) { st.Conditions[0].ObservedGeneration = 3 }), false},
		{"scope", bound("a"), with(bound(), func(st *oriav1alpha1.ScopeInstanceStatus) { st.Scope = oriav1alpha1.ScopeCluster }), false},
		{"publication", bound("a"), with(bound("a", "b"), func(st *oriav1alpha1.ScopeInstanceStatus) {
			st.Publication = &oriav1alpha1.PublicationStatus{Namespaces: 2}
		}), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := routineChange(tc.before, tc.after); got != tc.want {
				t.Errorf("routineChange = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPartialNamespaces(t *testing.T) {
	ensured := []engine.Outcome{
		{Namespace: "a", Action: engine.Unchanged}, {Namespace: "a", Action: engine.Created},
		{Namespace: "b", Action: engine.Created}, {Namespace: "b", Action: engine.Forbidden},
		{Namespace: "c", Action: engine.Forbidden}, {Namespace: "d", Action: engine.Failed}, {Namespace: "d", Action: engine.Updated},
	}
	if got := partialNamespaces([]string{"a"}, ensured); got != 2 {
		t.Errorf("partialNamespaces = %d, want 2 (b and d: some bindings in place, not all)", got)
	}
	if got := partialNamespaces([]string{"a", "b", "d"}, ensured); got != 0 {
		t.Errorf("partialNamespaces = %d, want 0", got)
	}
}

// TestConflicts: what a reconcile left alone, named once for the Events,
// the status and the requeue: the gate's alone when it could not be
// created, nothing when the writes stopped early, else the gate's squatter
// (when binding), the inline roles in conflict and the writes' conflicts.
func TestConflicts(t *testing.T) {
	tmpl := &oriav1alpha1.ScopeTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}}
	found := engine.Summarize([]engine.Outcome{{Namespace: "b", Name: "x", Action: engine.Conflict, Err: errors.New("RoleBinding x exists")}})
	p := &plan{template: tmpl, action: bindAll, gate: gatePlan{conflict: "ClusterRole g exists"}, conflicted: []string{"inline"}}
	for _, tc := range []struct {
		name string
		p    *plan
		res  result
		want []string
	}{
		{"writes ran to their end", p, result{summary: found, done: true},
			[]string{"ClusterRole g exists", `ClusterRole "inline" of ScopeTemplate "t" exists and was not created by oria for the template`, "RoleBinding x exists"}},
		{"revoking: the gate's squatter is not this reconcile's", &plan{template: tmpl, action: revokeAll, gate: p.gate}, result{summary: found, done: true},
			[]string{"RoleBinding x exists"}},
		{"no gate: its conflict alone", p, result{summary: found, gateless: true}, []string{"RoleBinding x exists"}},
		{"stopped early", p, result{summary: found}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.res.conflicts(tc.p)); diff != "" {
				t.Errorf("conflicts (-want +got):\n%s", diff)
			}
		})
	}
}
