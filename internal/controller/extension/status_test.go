package extension

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

func TestConditionFor(t *testing.T) {
	legacy := &plan{mode: oriav1alpha1.RBACModeLegacy, annotated: true, valid: true, crds: []string{"a.example.com", "b.example.com"}}
	fine := &plan{mode: oriav1alpha1.RBACModeFineGrained, annotated: true, valid: true, crds: []string{"a.example.com"}}
	tests := []struct {
		name string
		p    *plan
		out  outcome
		err  error
		want metav1.Condition
	}{{
		name: "internal error is Unknown, whatever the plan",
		p:    nil,
		err:  errors.New("etcd is sad"),
		want: metav1.Condition{Status: metav1.ConditionUnknown, Reason: oriav1alpha1.ReasonReconcileError,
			Message: "oria could not reconcile the ClusterRoles of this extension and retries: etcd is sad"},
	}, {
		name: "invalid mode names the value and keeps the roles",
		p:    &plan{annotated: true, annotation: "Sometimes", valid: false},
		want: metav1.Condition{Status: metav1.ConditionFalse, Reason: oriav1alpha1.ReasonInvalidMode,
			Message: `annotation oria.operatorframework.io/rbac-mode has the invalid value "Sometimes" (valid: Legacy, FineGrained, Unmanaged); nothing was changed and ClusterRoles generated earlier are kept`},
	}, {
		name: "unmanaged by default says so",
		p:    &plan{mode: oriav1alpha1.RBACModeUnmanaged, valid: true},
		want: metav1.Condition{Status: metav1.ConditionFalse, Reason: oriav1alpha1.ReasonUnmanaged,
			Message: "RBAC for this extension's APIs is not managed by oria; grant access manually or set the annotation oria.operatorframework.io/rbac-mode to Legacy or FineGrained (the annotation is not set, and oria's default mode is Unmanaged)"},
	}, {
		name: "unmanaged by annotation",
		p:    &plan{mode: oriav1alpha1.RBACModeUnmanaged, annotated: true, valid: true},
		want: metav1.Condition{Status: metav1.ConditionFalse, Reason: oriav1alpha1.ReasonUnmanaged,
			Message: "RBAC for this extension's APIs is not managed by oria; grant access manually or set the annotation oria.operatorframework.io/rbac-mode to Legacy or FineGrained"},
	}, {
		name: "legacy",
		p:    legacy,
		want: metav1.Condition{Status: metav1.ConditionTrue, Reason: oriav1alpha1.ReasonLegacy,
			Message: "ClusterRoles for 2 API(s) are in place and aggregated to the built-in admin, edit and view ClusterRoles"},
	}, {
		name: "legacy names cluster-scoped APIs and how they reach users",
		p:    &plan{mode: oriav1alpha1.RBACModeLegacy, annotated: true, valid: true, crds: []string{"a.example.com", "clusterissuers.cert-manager.io"}, clusterScoped: []string{"clusterissuers.cert-manager.io"}},
		want: metav1.Condition{Status: metav1.ConditionTrue, Reason: oriav1alpha1.ReasonLegacy,
			Message: "ClusterRoles for 2 API(s) are in place and aggregated to the built-in admin, edit and view ClusterRoles. Cluster-scoped: clusterissuers.cert-manager.io; these reach users only through ClusterRoleBindings to view, edit or admin (a RoleBinding to those roles grants nothing on a cluster-scoped API)"},
	}, {
		name: "fine-grained with a bundle role",
		p:    fine,
		out:  outcome{bundle: []string{"a.example.com-admin"}},
		want: metav1.Condition{Status: metav1.ConditionTrue, Reason: oriav1alpha1.ReasonFineGrained,
			Message: "ClusterRoles for 1 API(s) are in place, without aggregation; grant them with RBACPolicy objects. Provided by the bundle (used instead of generated roles): a.example.com-admin"},
	}, {
		name: "no APIs yet",
		p:    &plan{mode: oriav1alpha1.RBACModeLegacy, valid: true},
		want: metav1.Condition{Status: metav1.ConditionTrue, Reason: oriav1alpha1.ReasonLegacy,
			Message: "The extension provides no APIs yet (no CustomResourceDefinitions labelled for it); nothing to generate"},
	}, {
		name: "conflict is False and names the roles",
		p:    legacy,
		out:  outcome{conflicts: []string{`ClusterRole "a.example.com-view" exists and was not created by oria`}},
		want: metav1.Condition{Status: metav1.ConditionFalse, Reason: oriav1alpha1.ReasonConflict,
			Message: `ClusterRole "a.example.com-view" exists and was not created by oria. These roles are left alone; delete or rename them and oria generates its own. The extension's other ClusterRoles are in place (mode Legacy)`},
	}, {
		name: "a bundle role too broad is False, names the role and says the rest is in place",
		p: &plan{mode: oriav1alpha1.RBACModeLegacy, valid: true, crds: []string{"a.example.com"},
			tooBroad: []string{`bundle-provided ClusterRole "a.example.com-view" reaches beyond the extension's own APIs: rule 2 {...}: grants resource "secrets" of the core API group`}},
		out: outcome{bundle: []string{"a.example.com-view"}},
		want: metav1.Condition{Status: metav1.ConditionFalse, Reason: oriav1alpha1.ReasonBundleRoleTooBroad,
			Message: `Bundle-provided ClusterRole "a.example.com-view" reaches beyond the extension's own APIs: rule 2 {...}: grants resource "secrets" of the core API group. ` +
				`oria grants these roles nowhere (no aggregation label in Legacy mode, no binding from RBACPolicy objects) until the bundle narrows their rules to the extension's APIs. ` +
				`The extension's other ClusterRoles are in place (mode Legacy). Provided by the bundle (used instead of generated roles): a.example.com-view`},
	}, {
		name: "a conflict and a bundle role too broad: Conflict, both named",
		p:    &plan{mode: oriav1alpha1.RBACModeFineGrained, valid: true, crds: []string{"a.example.com"}, tooBroad: []string{"bundle-provided ClusterRole \"a.example.com-view\" reaches beyond"}},
		out:  outcome{conflicts: []string{`ClusterRole "a.example.com-edit" exists and was not created by oria`}},
		want: metav1.Condition{Status: metav1.ConditionFalse, Reason: oriav1alpha1.ReasonConflict,
			Message: `ClusterRole "a.example.com-edit" exists and was not created by oria. These roles are left alone; delete or rename them and oria generates its own. ` +
				`Bundle-provided ClusterRole "a.example.com-view" reaches beyond. ` +
				`oria grants these roles nowhere (no aggregation label in Legacy mode, no binding from RBACPolicy objects) until the bundle narrows their rules to the extension's APIs. ` +
				`The extension's other ClusterRoles are in place (mode FineGrained)`},
	}, {
		name: "many bundle roles too broad: the first five are described",
		p:    &plan{mode: oriav1alpha1.RBACModeLegacy, valid: true, crds: []string{"a.example.com"}, tooBroad: []string{"r1", "r2", "r3", "r4", "r5", "r6", "r7"}},
		want: metav1.Condition{Status: metav1.ConditionFalse, Reason: oriav1alpha1.ReasonBundleRoleTooBroad,
			Message: `R1. R2. R3. R4. R5. And 2 more bundle-provided ClusterRole(s) reach beyond the extension's own APIs. ` +
				`oria grants these roles nowhere (no aggregation label in Legacy mode, no binding from RBACPolicy objects) until the bundle narrows their rules to the extension's APIs. ` +
				`The extension's other ClusterRoles are in place (mode Legacy)`},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, conditionFor(tc.p, tc.out, tc.err)); diff != "" {
				t.Errorf("conditionFor (-want +got):\n%s", diff)
			}
		})
	}
}
