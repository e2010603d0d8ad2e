package scopetemplate

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/status"
)

// computeStatus returns the status of t after a reconcile with plan p (nil
// when gathering failed), write summary s and error err. It is pure. The
// observed generation advances when the reconcile evaluated the current
// spec (the plan exists); failed writes are then reported as ReconcileError.
func computeStatus(t *oriav1alpha1.ScopeTemplate, p *plan, s engine.Summary, err error) oriav1alpha1.ScopeTemplateStatus {
	st := *t.Status.DeepCopy()
	ready, ok := status.Begin(&st.Conditions, &st.ObservedGeneration, t.Generation, p != nil, err)
	if !ok {
		return st
	}
	st.Instances = p.instances
	switch {
	case err != nil:
		ready(metav1.ConditionUnknown, oriav1alpha1.ReasonReconcileError, err.Error())
		return st
	case p.specErr != nil:
		ready(metav1.ConditionFalse, p.specErr.Reason, p.specErr.Message)
		return st
	case len(s.Conflicts) > 0:
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonConflict, conflictMessage(s.Conflicts))
	case len(p.missing) > 0:
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonClusterRoleNotFound, fmt.Sprintf(
			"ClusterRole(s) %s do not exist: bindings to them grant nothing until they are created (oria looks again every %s)",
			status.Enumerate(quoted(p.missing), 10), cmp.Or(p.recheck, DefaultRecheckInterval)))
	case len(p.held) > 0:
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonProgressing, heldMessage(p.held))
	case len(p.instances) == 0:
		ready(metav1.ConditionTrue, oriav1alpha1.ReasonValid, "valid; not used by any ScopeInstance, so its inline ClusterRoles do not exist")
	case len(p.desired) == 0:
		ready(metav1.ConditionTrue, oriav1alpha1.ReasonValid,
			fmt.Sprintf("valid; used by %d ScopeInstance(s); it has no inline ClusterRoles", len(p.instances)))
	default:
		ready(metav1.ConditionTrue, oriav1alpha1.ReasonValid,
			fmt.Sprintf("valid; %d inline ClusterRole(s) in place for %d ScopeInstance(s)", len(p.desired), len(p.instances)))
	}
	st.ClusterRoles = p.roles
	return st
}

// heldMessage says which roles keep their previous rules, waiting for
// which instances' ServiceAccounts.
func heldMessage(held map[string][]string) string {
	roles := make([]string, 0, len(held))
	waiting := map[string]bool{}
	for role, instances := range held {
		roles = append(roles, role)
		for _, i := range instances {
			waiting[i] = true
		}
	}
	slices.Sort(roles)
	instances := slices.Sorted(maps.Keys(waiting))
	return fmt.Sprintf("inline ClusterRole(s) %s keep their previous rules until the ServiceAccount ceiling of ScopeInstance(s) %s confirms the new rules "+
		"(or the instance removes its bindings of them); oria looks again every %s",
		status.Enumerate(quoted(roles), 10), status.Enumerate(quoted(instances), 10), CeilingWaitInterval)
}

func conflictMessage(conflicts []error) string {
	msgs := make([]string, len(conflicts))
	for i, c := range conflicts {
		msgs[i] = c.Error()
	}
	return status.Enumerate(msgs, 5) + "; rename the role in the template or remove the other object"
}

// recordEvents emits one Event per kind of change, naming the roles.
func (r *Reconciler) recordEvents(t *oriav1alpha1.ScopeTemplate, ensured, deleted []engine.Outcome) {
	byAction := map[engine.Action][]string{}
	for _, list := range [][]engine.Outcome{ensured, deleted} {
		for _, o := range list {
			byAction[o.Action] = append(byAction[o.Action], o.Name)
		}
	}
	for _, e := range []struct {
		action engine.Action
		reason string
		verb   string
		past   string
	}{
		{engine.Created, EventClusterRolesCreated, "Create", "created"},
		{engine.Updated, EventClusterRolesUpdated, "Update", "updated"},
		{engine.Deleted, EventClusterRolesDeleted, "Delete", "deleted"},
	} {
		if names := byAction[e.action]; len(names) > 0 {
			r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, e.reason, e.verb,
				"%s %d ClusterRole(s): %s", e.past, len(names), status.Enumerate(names, 10))
		}
	}
	// A conflict is news when the template was not already reporting it;
	// every recheck would otherwise repeat the warning.
	prev := meta.FindStatusCondition(t.Status.Conditions, oriav1alpha1.TypeReady)
	if names := byAction[engine.Conflict]; len(names) > 0 && (prev == nil || prev.Reason != oriav1alpha1.ReasonConflict) {
		r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, EventConflict, "Create",
			"ClusterRole(s) %s exist and were not created by oria for this template; left unchanged", status.Enumerate(names, 10))
	}
}

func quoted(items []string) []string {
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
