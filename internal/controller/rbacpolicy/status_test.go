package rbacpolicy

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	policymodel "github.com/operator-framework/oria/internal/policy"
)

func TestComputeStatus(t *testing.T) {
	policy := &oriav1alpha1.RBACPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "devs", UID: "puid", Generation: 2},
		Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: "argocd", Access: oriav1alpha1.AccessView,
			Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "developers"}}, Namespaces: []string{"team-a"}},
		Status: oriav1alpha1.RBACPolicyStatus{ObservedGeneration: 1, APIs: []string{"old.example.com"}, Scope: oriav1alpha1.ScopeNamespaces,
			BoundNamespaces: []string{"team-a"}, BoundNamespaceCount: 1},
	}
	compiled := policymodel.Compile(policy, []string{"applications.argoproj.io"})
	instance := func(gen int64, ready metav1.ConditionStatus, reason, msg string) *oriav1alpha1.ScopeInstance {
		si := compiled.Instance.DeepCopy()
		si.Generation = gen
		si.Status = oriav1alpha1.ScopeInstanceStatus{Scope: oriav1alpha1.ScopeNamespaces, BoundNamespaces: []string{"team-a"}, BoundNamespaceCount: 1,
			Conditions: []metav1.Condition{{Type: oriav1alpha1.TypeReady, Status: ready, Reason: reason, Message: msg, ObservedGeneration: 1}}}
		return si
	}
	apply := &plan{decision: decisionApply, compiled: compiled}
	cond := func(s metav1.ConditionStatus, reason, msg string) []metav1.Condition {
		return []metav1.Condition{{Type: oriav1alpha1.TypeReady, Status: s, Reason: reason, Message: msg, ObservedGeneration: 2}}
	}
	granted := func(conds []metav1.Condition) oriav1alpha1.RBACPolicyStatus {
		return oriav1alpha1.RBACPolicyStatus{ObservedGeneration: 2, APIs: []string{"applications.argoproj.io"}, Scope: oriav1alpha1.ScopeNamespaces,
			BoundNamespaces: []string{"team-a"}, BoundNamespaceCount: 1, ScopeTemplateName: "rbacpolicy-devs", ScopeInstanceName: "rbacpolicy-devs", Conditions: conds}
	}
	tests := []struct {
		name string
		p    *plan
		out  result
		err  error
		want oriav1alpha1.RBACPolicyStatus
	}{{
		name: "error: Unknown, nothing else advances",
		err:  errors.New("boom"),
		want: oriav1alpha1.RBACPolicyStatus{ObservedGeneration: 1, APIs: []string{"old.example.com"}, Scope: oriav1alpha1.ScopeNamespaces,
			BoundNamespaces: []string{"team-a"}, BoundNamespaceCount: 1, Conditions: cond(metav1.ConditionUnknown, oriav1alpha1.ReasonReconcileError, "boom")},
	}, {
		name: "invalid subject keeps the grant as it is",
		p: &plan{decision: decisionNarrow, reason: oriav1alpha1.ReasonInvalidSubject, message: "bad subject",
			narrowed: policymodel.Narrowed{Template: compiled.Template, Instance: compiled.Instance}},
		want: oriav1alpha1.RBACPolicyStatus{ObservedGeneration: 2, APIs: []string{"old.example.com"}, Scope: oriav1alpha1.ScopeNamespaces,
			BoundNamespaces: []string{"team-a"}, BoundNamespaceCount: 1, ScopeTemplateName: "rbacpolicy-devs", ScopeInstanceName: "rbacpolicy-devs",
			Conditions: cond(metav1.ConditionFalse, oriav1alpha1.ReasonInvalidSubject, "bad subject (the grant in force stays, in 1 namespace, within what the current spec still allows; nothing the spec adds is granted until it is valid)")},
	}, {
		name: "invalid subject, the admin narrowed: the instance mirrored",
		p: &plan{decision: decisionNarrow, reason: oriav1alpha1.ReasonInvalidSubject, message: "bad subject",
			narrowed: policymodel.Narrowed{Template: compiled.Template, Instance: compiled.Instance, Removed: []string{`namespace "victim"`}}},
		out: result{instance: instance(1, metav1.ConditionTrue, oriav1alpha1.ReasonBound, "ok")},
		want: oriav1alpha1.RBACPolicyStatus{ObservedGeneration: 2, APIs: []string{"old.example.com"}, Scope: oriav1alpha1.ScopeNamespaces,
			BoundNamespaces: []string{"team-a"}, BoundNamespaceCount: 1, ScopeTemplateName: "rbacpolicy-devs", ScopeInstanceName: "rbacpolicy-devs",
			Conditions: cond(metav1.ConditionFalse, oriav1alpha1.ReasonInvalidSubject,
				"bad subject (the grant in force stays, in 1 namespace, within what the current spec still allows; nothing the spec adds is granted until it is valid)")},
	}, {
		name: "a role under a generated name that is not oria's: Conflict, even with the instance bound",
		p:    &plan{decision: decisionApply, compiled: compiled, foreign: []string{`ClusterRole "x-view" exists and was neither created by oria`}},
		out:  result{instance: instance(1, metav1.ConditionTrue, oriav1alpha1.ReasonBound, "ok")},
		want: granted(cond(metav1.ConditionFalse, oriav1alpha1.ReasonConflict,
			`ClusterRole "x-view" exists and was neither created by oria. These ClusterRoles are not bound; delete them (oria then generates its own) or grant them yourself. view access is granted only through the others`)),
	}, {
		name: "oria's role changed by someone: Progressing, never Bound",
		p:    &plan{decision: decisionApply, compiled: compiled, pending: []string{`ClusterRole "x-view" was generated by oria but changed since`}},
		out:  result{instance: instance(1, metav1.ConditionTrue, oriav1alpha1.ReasonBound, "ok")},
		want: granted(cond(metav1.ConditionFalse, oriav1alpha1.ReasonProgressing,
			`view access granted in 1 namespace through the roles in place; withheld until oria generates or restores them: ClusterRole "x-view" was generated by oria but changed since`)),
	}, {
		name: "revoked: the grant is gone from the status too",
		p:    &plan{decision: decisionRevoke, reason: oriav1alpha1.ReasonExtensionNotFound, message: "no extension"},
		want: oriav1alpha1.RBACPolicyStatus{ObservedGeneration: 2, ScopeTemplateName: "rbacpolicy-devs", ScopeInstanceName: "rbacpolicy-devs",
			Conditions: cond(metav1.ConditionFalse, oriav1alpha1.ReasonExtensionNotFound, "no extension")},
	}, {
		name: "conflict",
		p:    apply,
		out:  result{conflict: "ScopeTemplate \"rbacpolicy-devs\" exists"},
		want: oriav1alpha1.RBACPolicyStatus{ObservedGeneration: 2, APIs: []string{"applications.argoproj.io"}, Scope: oriav1alpha1.ScopeNamespaces,
			BoundNamespaces: []string{"team-a"}, BoundNamespaceCount: 1, ScopeTemplateName: "rbacpolicy-devs", ScopeInstanceName: "rbacpolicy-devs",
			Conditions: cond(metav1.ConditionFalse, oriav1alpha1.ReasonConflict, "ScopeTemplate \"rbacpolicy-devs\" exists")},
	}, {
		name: "instance not yet in the cache",
		p:    apply,
		want: oriav1alpha1.RBACPolicyStatus{ObservedGeneration: 2, APIs: []string{"applications.argoproj.io"}, Scope: oriav1alpha1.ScopeNamespaces,
			BoundNamespaces: []string{"team-a"}, BoundNamespaceCount: 1, ScopeTemplateName: "rbacpolicy-devs", ScopeInstanceName: "rbacpolicy-devs",
			Conditions: cond(metav1.ConditionFalse, oriav1alpha1.ReasonProgressing, "waiting for the ScopeInstance to be created")},
	}, {
		name: "instance has not observed its generation",
		p:    apply,
		out:  result{instance: instance(2, metav1.ConditionTrue, oriav1alpha1.ReasonBound, "ok")},
		want: granted(cond(metav1.ConditionFalse, oriav1alpha1.ReasonProgressing, `waiting for ScopeInstance "rbacpolicy-devs" to bind the roles`)),
	}, {
		name: "instance reason mirrored",
		p:    apply,
		out:  result{instance: instance(1, metav1.ConditionFalse, oriav1alpha1.ReasonNamespaceNotFound, "team-b missing")},
		want: granted(cond(metav1.ConditionFalse, oriav1alpha1.ReasonNamespaceNotFound, `ScopeInstance "rbacpolicy-devs": team-b missing`)),
	}, {
		name: "namespaced policy over a cluster-scoped API only: grants nothing",
		p:    &plan{decision: decisionApply, compiled: compiled, clusterScoped: []string{"applications.argoproj.io"}},
		out:  result{instance: instance(1, metav1.ConditionTrue, oriav1alpha1.ReasonBound, "ok")},
		want: granted(cond(metav1.ConditionFalse, oriav1alpha1.ReasonClusterScopedAPI,
			"every API this policy covers is cluster-scoped (applications.argoproj.io): a RoleBinding cannot grant a cluster-scoped API, so this policy grants nothing in its namespaces; remove spec.namespaces and spec.namespaceSelector to grant it cluster-wide")),
	}, {
		name: "namespaced policy over a cluster-scoped API among others",
		p: &plan{decision: decisionApply, compiled: policymodel.Compile(policy, []string{"applications.argoproj.io", "appprojects.argoproj.io"}),
			clusterScoped: []string{"appprojects.argoproj.io"}},
		out: result{instance: instance(1, metav1.ConditionTrue, oriav1alpha1.ReasonBound, "ok")},
		want: func() oriav1alpha1.RBACPolicyStatus {
			st := granted(cond(metav1.ConditionFalse, oriav1alpha1.ReasonClusterScopedAPI,
				"view access granted in 1 namespace, but appprojects.argoproj.io is cluster-scoped: a RoleBinding cannot grant it; grant it with a second, cluster-wide RBACPolicy (no namespaces, no selector) naming it in spec.apis"))
			st.APIs = []string{"applications.argoproj.io", "appprojects.argoproj.io"}
			return st
		}(),
	}, {
		name: "bound",
		p:    apply,
		out:  result{instance: instance(1, metav1.ConditionTrue, oriav1alpha1.ReasonBound, "ok")},
		want: granted(cond(metav1.ConditionTrue, oriav1alpha1.ReasonBound, "view access to applications.argoproj.io for 1 subject in 1 namespace")),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := computeStatus(policy, tc.p, tc.out, tc.err)
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
				t.Errorf("computeStatus (-want +got):\n%s", diff)
			}
		})
	}
}
