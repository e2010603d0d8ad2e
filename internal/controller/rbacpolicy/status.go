package rbacpolicy

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
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
	if p.modeNote != "" {
		ready = noteMode(ready, p.modeNote)
	}
	switch p.decision {
	case decisionRevoke:
		st.APIs, st.Scope, st.BoundNamespaces, st.BoundNamespaceCount = nil, "", nil, 0
		if p.phase == binding.WindowExpired {
			expired(ready, p)
			return st
		}
		ready(metav1.ConditionFalse, p.reason, p.message)
		return st
	case decisionNarrow:
		mirror(&st, out.instance)
		if p.phase == binding.WindowExpired {
			// What is kept is over too.
			expired(ready, p)
			return st
		}
		// What was just removed is told by the Narrowed event; the
		// condition says what holds as long as the spec stays as it is.
		msg := p.message + fmt.Sprintf(" (the grant in force stays, %s, within what the current spec still allows; nothing the spec adds is granted until it is valid)",
			describeBound(st))
		if out.conflict != "" {
			msg += "; " + out.conflict
		}
		ready(metav1.ConditionFalse, p.reason, msg)
		return st
	}
	c := p.compiled
	st.APIs = c.APIs
	if out.conflict != "" {
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonConflict, out.conflict)
		return st
	}
	inst := out.instance
	mirror(&st, inst)
	if len(p.clusterScoped) > 0 && len(p.clusterScoped) == len(c.APIs) {
		// Whatever the ScopeInstance does, RoleBindings reach nothing here.
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonClusterScopedAPI, fmt.Sprintf(
			"every API this policy covers is cluster-scoped (%s): a RoleBinding cannot grant a cluster-scoped API, so this policy grants nothing in its namespaces; remove spec.namespaces and spec.namespaceSelector to grant it cluster-wide",
			strings.Join(p.clusterScoped, ", ")))
		return st
	}
	if len(p.foreign) > 0 {
		// A role under a generated name that is someone else's: the admin
		// must act, whatever the instance says.
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonConflict, fmt.Sprintf(
			"%s. These ClusterRoles are not bound; delete them (oria then generates its own) or grant them yourself. %s access is granted only through the others%s",
			strings.Join(p.foreign, "; "), policy.Spec.Access, pendingNote(p)))
		return st
	}
	switch {
	case inst == nil:
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonProgressing, "waiting for the ScopeInstance to be created")
	case !instanceCaughtUp(inst, c.Instance):
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonProgressing, fmt.Sprintf("waiting for ScopeInstance %q to bind the roles%s", inst.Name, pendingNote(p)))
	case instanceReady(inst).Status != metav1.ConditionTrue:
		r := instanceReady(inst)
		ready(r.Status, r.Reason, fmt.Sprintf("ScopeInstance %q: %s", inst.Name, r.Message))
	case len(p.clusterScoped) > 0:
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonClusterScopedAPI, fmt.Sprintf(
			"%s access granted %s, but %s cluster-scoped: a RoleBinding cannot grant it; grant it with a second, cluster-wide RBACPolicy (no namespaces, no selector) naming it in spec.apis",
			policy.Spec.Access, describeBound(st), strings.Join(p.clusterScoped, ", ")+map[bool]string{true: " is", false: " are"}[len(p.clusterScoped) == 1]))
	case len(p.tooBroad) > 0:
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonBundleRoleTooBroad,
			fmt.Sprintf("%s access granted %s through the roles that stay within the extension; withheld: %s%s",
				policy.Spec.Access, describeBound(st), strings.Join(p.tooBroad, "; "), pendingNote(p)))
	case len(p.pending) > 0:
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonProgressing,
			fmt.Sprintf("%s access granted %s through the roles in place; withheld until oria generates or restores them: %s",
				policy.Spec.Access, describeBound(st), strings.Join(p.pending, "; ")))
	case len(c.Missing) > 0:
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonAPINotFound,
			fmt.Sprintf("granted for %s, but ClusterExtension %q does not provide %s",
				strings.Join(c.APIs, ", "), policy.Spec.ExtensionName, strings.Join(c.Missing, ", ")))
	default:
		ready(metav1.ConditionTrue, oriav1alpha1.ReasonBound,
			fmt.Sprintf("%s access to %s for %d subject%s %s%s", policy.Spec.Access, strings.Join(c.APIs, ", "),
				len(policy.Spec.Subjects), map[bool]string{true: "", false: "s"}[len(policy.Spec.Subjects) == 1], describeBound(st), windowNote(p)))
	}
	return st
}

// expired says Expired: whatever else is wrong, the grant is over. An
// invalid mode annotation on the extension does not matter to a grant that
// is over (the extension says so), nor does a window that never opened
// (neverOpens); a spec error is told as well.
func expired(ready status.Ready, p *plan) {
	also := fmt.Sprintf(" (also: %s: %s)", p.reason, p.message)
	if p.reason == oriav1alpha1.ReasonPending || p.reason == oriav1alpha1.ReasonInvalidMode {
		also = ""
	}
	ready(metav1.ConditionFalse, oriav1alpha1.ReasonExpired, fmt.Sprintf("the grant %s (spec.expiresAt): it grants nothing%s",
		p.window.Describe(p.now), also))
}

// noteMode adds note to every Ready message but Expired and Pending ones
// (an invalid mode annotation does not matter to a window that is over or
// has not started).
func noteMode(ready status.Ready, note string) status.Ready {
	return func(s metav1.ConditionStatus, reason, message string) {
		if reason != oriav1alpha1.ReasonExpired && reason != oriav1alpha1.ReasonPending {
			message += "; " + note
		}
		ready(s, reason, message)
	}
}

// mirror copies where the ScopeInstance has bound into the policy's status
// (nothing when the cache does not show it).
func mirror(st *oriav1alpha1.RBACPolicyStatus, inst *oriav1alpha1.ScopeInstance) {
	if inst != nil {
		st.Scope, st.BoundNamespaces, st.BoundNamespaceCount = inst.Status.Scope, inst.Status.BoundNamespaces, inst.Status.BoundNamespaceCount
	}
}

// instanceCaughtUp reports whether the ScopeInstance has reported on the
// spec the policy wants.
func instanceCaughtUp(inst, want *oriav1alpha1.ScopeInstance) bool {
	r := instanceReady(inst)
	return r != nil && r.ObservedGeneration == inst.Generation && equality.Semantic.DeepEqual(inst.Spec, want.Spec)
}

func instanceReady(inst *oriav1alpha1.ScopeInstance) *metav1.Condition {
	return meta.FindStatusCondition(inst.Status.Conditions, oriav1alpha1.TypeReady)
}

// pendingNote adds the roles withheld while oria generates or restores
// them to a message about others.
func pendingNote(p *plan) string {
	if len(p.pending) == 0 {
		return ""
	}
	return "; also withheld until oria generates or restores them: " + strings.Join(p.pending, "; ")
}

func describeBound(st oriav1alpha1.RBACPolicyStatus) string {
	if st.Scope == oriav1alpha1.ScopeCluster {
		return "cluster-wide"
	}
	if st.BoundNamespaceCount == 1 {
		return "in 1 namespace"
	}
	return fmt.Sprintf("in %d namespaces", st.BoundNamespaceCount)
}
