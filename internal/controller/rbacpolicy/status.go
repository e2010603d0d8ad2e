package rbacpolicy

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	policymodel "github.com/operator-framework/oria/internal/policy"
	"github.com/operator-framework/oria/internal/status"
)

// computeStatus returns the status of policy after a reconcile with plan p
// (nil when gathering failed), result out and error err. It is pure. The
// observed generation advances when the reconcile evaluated the current
// spec (the plan exists); a failed write is then reported as ReconcileError.
func computeStatus(policy *oriav1alpha1.RBACPolicy, p *plan, out result, err error) oriav1alpha1.RBACPolicyStatus {
	st := *policy.Status.DeepCopy()
	ready, ok := status.Begin(&st.Conditions, &st.ObservedGeneration, policy.Generation, p != nil, err)
	if !ok {
		return st
	}
	st.ScopeTemplateName = policymodel.ObjectName(policy.Name)
	st.ScopeInstanceName = policymodel.ObjectName(policy.Name)
	if err != nil {
		ready(metav1.ConditionUnknown, oriav1alpha1.ReasonReconcileError, err.Error())
		return st
	}
	switch p.decision {
	case decisionKeep:
		msg := p.message
		if st.Scope != "" {
			// Say what stays in force (the compiled objects are kept).
			msg += fmt.Sprintf(" (the grant in force stays, %s)", describeBound(st))
		}
		ready(metav1.ConditionFalse, p.reason, msg)
		return st
	case decisionRevoke:
		st.APIs, st.Scope, st.BoundNamespaces, st.BoundNamespaceCount = nil, "", nil, 0
		ready(metav1.ConditionFalse, p.reason, p.message)
		return st
	}
	c := p.compiled
	st.APIs = c.APIs
	if out.conflict != "" {
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonConflict, out.conflict)
		return st
	}
	if len(p.clusterScoped) > 0 && len(p.clusterScoped) == len(c.APIs) {
		// Whatever the ScopeInstance does, RoleBindings reach nothing here.
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonClusterScopedAPI, fmt.Sprintf(
			"every API this policy covers is cluster-scoped (%s): a RoleBinding cannot grant a cluster-scoped API, so this policy grants nothing in its namespaces; remove spec.namespaces and spec.namespaceSelector to grant it cluster-wide",
			strings.Join(p.clusterScoped, ", ")))
		if out.instance != nil {
			st.Scope, st.BoundNamespaces, st.BoundNamespaceCount = out.instance.Status.Scope, out.instance.Status.BoundNamespaces, out.instance.Status.BoundNamespaceCount
		}
		return st
	}
	inst := out.instance
	if inst == nil {
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonProgressing, "waiting for the ScopeInstance to be created")
		return st
	}
	st.Scope = inst.Status.Scope
	st.BoundNamespaces = inst.Status.BoundNamespaces
	st.BoundNamespaceCount = inst.Status.BoundNamespaceCount
	instReady := meta.FindStatusCondition(inst.Status.Conditions, oriav1alpha1.TypeReady)
	switch {
	case instReady == nil || instReady.ObservedGeneration != inst.Generation || !equality.Semantic.DeepEqual(inst.Spec, c.Instance.Spec):
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonProgressing, fmt.Sprintf("waiting for ScopeInstance %q to bind the roles", inst.Name))
	case instReady.Status != metav1.ConditionTrue:
		ready(instReady.Status, instReady.Reason, fmt.Sprintf("ScopeInstance %q: %s", inst.Name, instReady.Message))
	case len(p.clusterScoped) > 0:
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonClusterScopedAPI, fmt.Sprintf(
			"%s access granted %s, but %s cluster-scoped: a RoleBinding cannot grant it; grant it with a second, cluster-wide RBACPolicy (no namespaces, no selector) naming it in spec.apis",
			policy.Spec.Access, describeBound(st), strings.Join(p.clusterScoped, ", ")+map[bool]string{true: " is", false: " are"}[len(p.clusterScoped) == 1]))
	case len(p.withheld) > 0:
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonBundleRoleTooBroad,
			fmt.Sprintf("%s access granted %s through the roles that stay within the extension; withheld: %s",
				policy.Spec.Access, describeBound(st), strings.Join(p.withheld, "; ")))
	case len(c.Missing) > 0:
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonAPINotFound,
			fmt.Sprintf("granted for %s, but ClusterExtension %q does not provide %s",
				strings.Join(c.APIs, ", "), policy.Spec.ExtensionName, strings.Join(c.Missing, ", ")))
	default:
		ready(metav1.ConditionTrue, oriav1alpha1.ReasonBound,
			fmt.Sprintf("%s access to %s for %d subjects %s", policy.Spec.Access, strings.Join(c.APIs, ", "),
				len(policy.Spec.Subjects), describeBound(st)))
	}
	return st
}

func describeBound(st oriav1alpha1.RBACPolicyStatus) string {
	if st.Scope == oriav1alpha1.ScopeCluster {
		return "cluster-wide"
	}
	return fmt.Sprintf("in %d namespaces", st.BoundNamespaceCount)
}
