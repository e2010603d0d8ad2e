package scopeinstance

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/status"
)

// computeStatus returns the status of si after a reconcile with plan p (nil
// when gathering failed), write result res and error err. It is pure. The
// observed generation advances when the reconcile evaluated the current
// spec (the plan exists): the status then describes that generation, and
// writes that failed are reported as ReconcileError (Unknown) and retried.
// When gathering failed nothing was decided, and it stays where it was;
// nor does it change when the reconcile at its window's instant changed
// access (postponesStatus: the next reconcile writes it).
func computeStatus(si *oriav1alpha1.ScopeInstance, p *plan, res result, err error) oriav1alpha1.ScopeInstanceStatus {
	st := *si.Status.DeepCopy()
	if postponesStatus(p, res, err) {
		return st
	}
	ready, ok := status.Begin(&st.Conditions, &st.ObservedGeneration, si.Generation, p != nil, err)
	if !ok {
		return st
	}
	st.NamespaceUIDs, st.PinnedFor = p.pins, p.pinnedFor
	if p.action == revokeOnly && p.phase == binding.WindowOpen {
		// A spec error keeps what is bound, but the bindings it no longer
		// allows went even so.
		st.BoundNamespaces = slices.DeleteFunc(st.BoundNamespaces, func(ns string) bool {
			return slices.ContainsFunc(res.summary.Changed[engine.Deleted], func(o engine.Outcome) bool { return o.Namespace == ns })
		})
		st.BoundNamespaceCount = int32(len(st.BoundNamespaces))
	} else {
		st.Scope = oriav1alpha1.ScopeNamespaces
		if p.cluster {
			st.Scope = oriav1alpha1.ScopeCluster
		}
		st.BoundNamespaces, st.PartiallyBoundNamespaceCount = nil, 0
		if p.phase == binding.WindowOpen {
			st.BoundNamespaces = res.bound
			st.PartiallyBoundNamespaceCount = int32(partialNamespaces(res.bound, res.ensured))
		}
		st.BoundNamespaceCount = int32(len(st.BoundNamespaces))
		st.Publication = res.published.Status
	}
	ready(readyCondition(si, p, res, err, st))
	return st
}

// readyCondition returns the Ready condition of an instance after a
// reconcile (computeStatus; st the status computed so far), the first
// state that applies: a spec error, an error, a conflict, outside the
// window, then, for a grant that binds, what it still waits for.
func readyCondition(si *oriav1alpha1.ScopeInstance, p *plan, res result, err error, st oriav1alpha1.ScopeInstanceStatus) (metav1.ConditionStatus, string, string) {
	switch {
	case p.specErr != nil && p.phase == binding.WindowOpen:
		return metav1.ConditionFalse, p.specErr.Reason, p.specErr.Message
	case err != nil:
		return metav1.ConditionUnknown, oriav1alpha1.ReasonReconcileError, err.Error()
	case len(res.conflicts(p)) > 0:
		return metav1.ConditionFalse, oriav1alpha1.ReasonConflict, status.Enumerate(res.conflicts(p), 5) + "; oria leaves such objects alone: remove or rename them"
	case p.specErr != nil:
		// A gated grant before its window reads its spec (gate.go).
		return metav1.ConditionFalse, p.specErr.Reason, fmt.Sprintf("%s (the grant is time-bound, %s: nothing is granted before spec.notBefore)",
			p.specErr.Message, p.window.Describe(p.now))
	case p.phase == binding.WindowPending && p.gate.wanted():
		return metav1.ConditionFalse, oriav1alpha1.ReasonPending, fmt.Sprintf(
			"the grant is time-bound, %s: nothing is granted before spec.notBefore; its bindings are made in %d namespace(s) to ClusterRole %q, "+
				"which holds no rule until then and every rule of its %d role(s) from then on", p.window.Describe(p.now), len(p.targets.Namespaces),
			p.gate.want.Name, len(p.roles))
	case p.phase == binding.WindowPending:
		return metav1.ConditionFalse, oriav1alpha1.ReasonPending, fmt.Sprintf(
			"the grant is time-bound, %s: nothing is bound before spec.notBefore", p.window.Describe(p.now))
	case p.phase == binding.WindowExpired:
		return metav1.ConditionFalse, oriav1alpha1.ReasonExpired, fmt.Sprintf(
			"the grant %s (spec.expiresAt): its bindings are deleted and it grants nothing; the object stays as the record of the grant (to grant again, move spec.expiresAt later, on its RBACPolicy if it is compiled from one)",
			p.window.Describe(p.now))
	}
	return boundCondition(si, p, res, st)
}

// boundCondition is readyCondition for a grant that binds, inside its
// window with a valid spec.
func boundCondition(si *oriav1alpha1.ScopeInstance, p *plan, res result, st oriav1alpha1.ScopeInstanceStatus) (metav1.ConditionStatus, string, string) {
	switch {
	case res.refused():
		sa := si.Spec.ServiceAccount
		written := "so they were not written"
		if res.revoked > 0 {
			written = fmt.Sprintf("so they were not written and %d of them, written before, were removed (what their ClusterRole grants changed)", res.revoked)
		}
		return metav1.ConditionFalse, oriav1alpha1.ReasonForbidden, fmt.Sprintf(
			"ServiceAccount %s/%s (spec.serviceAccount) may not grant %d binding(s), %s: %s (%s; oria tries again every %s)",
			sa.Namespace, sa.Name, len(res.summary.Forbidden), written, errorList(res.summary.Forbidden, 3), boundWhere(p, st), cmp.Or(p.recheck, DefaultRecheckInterval))
	case len(p.targets.Recreated) > 0:
		return metav1.ConditionFalse, oriav1alpha1.ReasonNamespaceRecreated, fmt.Sprintf(
			"namespace(s) %s were deleted and created again since this spec was written: a grant checked for the old namespace is not carried over, "+
				"so they are not bound until the spec is written again other than its window, which the guard checks anew (remove them from spec.namespaces and add them back; a namespaceSelector follows names) (%s)",
			status.Enumerate(p.targets.Recreated, 10), boundWhere(p, st))
	case len(p.targets.Missing) > 0:
		return metav1.ConditionFalse, oriav1alpha1.ReasonNamespaceNotFound,
			fmt.Sprintf("namespace(s) %s do not exist; they are bound as soon as they are created (bound in %d other namespace(s))",
				status.Enumerate(p.targets.Missing, 10), len(st.BoundNamespaces))
	case len(p.pending) > 0:
		msg := fmt.Sprintf("waiting for the ScopeTemplate controller to create ClusterRole(s) %s", status.Enumerate(p.pending, 10))
		// If the template says why it cannot, say it here too.
		if c := meta.FindStatusCondition(p.template.Status.Conditions, oriav1alpha1.TypeReady); c != nil && c.Status != metav1.ConditionTrue {
			msg += fmt.Sprintf(" (ScopeTemplate %q: %s: %s)", p.template.Name, c.Reason, c.Message)
		}
		return metav1.ConditionFalse, oriav1alpha1.ReasonProgressing, msg
	case p.deferred > 0:
		return metav1.ConditionFalse, oriav1alpha1.ReasonWaitingForRules, fmt.Sprintf(
			"%d binding(s) of ClusterRole(s) %s wait until the role holds ScopeTemplate %q's current rules (no binding is made against rules not checked for it; %s)",
			p.deferred, status.Enumerate(p.ahead, 10), p.template.Name, boundWhere(p, st))
	case p.gate.wanted() && len(p.gate.missing) > 0:
		// The instance reads the roles its gate copies itself: it knows
		// at once, before the template's own recheck says so.
		return metav1.ConditionFalse, oriav1alpha1.ReasonClusterRoleNotFound, fmt.Sprintf(
			"ClusterRole(s) %s of ScopeTemplate %q do not exist: ClusterRole %q, the grant's gate, holds none of their rules, so its bindings grant nothing of them until they are created (%s)",
			status.Enumerate(p.gate.missing, 10), p.template.Name, p.gate.want.Name, boundWhere(p, st))
	case templateReason(p.template) == oriav1alpha1.ReasonClusterRoleNotFound:
		c := meta.FindStatusCondition(p.template.Status.Conditions, oriav1alpha1.TypeReady)
		return metav1.ConditionFalse, oriav1alpha1.ReasonClusterRoleNotFound,
			fmt.Sprintf("%s, but ScopeTemplate %q: %s", boundWhere(p, st), p.template.Name, c.Message)
	case res.published.NoNamespace != "":
		return metav1.ConditionFalse, oriav1alpha1.ReasonPublicationNamespaceNotFound, fmt.Sprintf(
			"%s, but namespace %q (spec.publication.configMap.namespace) does not exist; the list is published there as soon as it is created", boundWhere(p, st), res.published.NoNamespace)
	case res.published.Conflict != "":
		return metav1.ConditionFalse, oriav1alpha1.ReasonConflict, fmt.Sprintf(
			"%s, but spec.publication: %s; oria leaves it as it is and looks again every %s", boundWhere(p, st), res.published.Conflict, DefaultRecheckInterval)
	case !p.targets.Cluster && len(st.BoundNamespaces) == 0 && len(p.targets.Namespaces) > 0 && p.gate.wanted() && !p.gate.filled():
		// The gate holds no rule: the roles it copies have none.
		return metav1.ConditionTrue, oriav1alpha1.ReasonBound, fmt.Sprintf(
			"%d ClusterRole(s) bound in %d namespace(s) through ClusterRole %q, the grant's gate, which holds no rule: the roles it copies grant nothing now%s",
			len(p.roles), len(p.targets.Namespaces), p.gate.want.Name, windowNote(p))
	case !p.targets.Cluster && len(st.BoundNamespaces) == 0:
		// A selector that matches nothing yet is a standing rule, not an
		// error; it says so rather than claiming a grant.
		return metav1.ConditionTrue, oriav1alpha1.ReasonBound, fmt.Sprintf(
			"%d ClusterRole(s) bound in 0 namespaces%s: no namespace matches yet; namespaces are bound as soon as they match", len(p.roles), windowNote(p))
	}
	return metav1.ConditionTrue, oriav1alpha1.ReasonBound, boundWhere(p, st) + windowNote(p)
}

// routineChange reports whether after differs from before only in what the
// steady Bound state counts: the bound namespaces, their number and the
// Ready message that states it, with Ready True (Bound) on both sides and
// the same observed generation, scope and publication. Such a change may
// wait for the instance's status spacing (status.Spacing); every other one
// is written at once, so a change of Ready's status or reason is never held
// back.
func routineChange(before, after oriav1alpha1.ScopeInstanceStatus) bool {
	if before.ObservedGeneration != after.ObservedGeneration || before.Scope != after.Scope || !maps.Equal(before.NamespaceUIDs, after.NamespaceUIDs) || before.PinnedFor != after.PinnedFor ||
		!equality.Semantic.DeepEqual(before.Publication, after.Publication) || len(before.Conditions) != len(after.Conditions) {
		return false
	}
	for i, b := range before.Conditions {
		a := after.Conditions[i]
		if b.Type == oriav1alpha1.TypeReady {
			b.Message, a.Message = "", ""
		}
		if !equality.Semantic.DeepEqual(b, a) {
			return false
		}
	}
	ready := meta.FindStatusCondition(after.Conditions, oriav1alpha1.TypeReady)
	return ready != nil && ready.Status == metav1.ConditionTrue && ready.Reason == oriav1alpha1.ReasonBound
}

// templateReason returns the reason of t's Ready condition, or "".
func templateReason(t *oriav1alpha1.ScopeTemplate) string {
	if c := meta.FindStatusCondition(t.Status.Conditions, oriav1alpha1.TypeReady); c != nil && c.ObservedGeneration == t.Generation {
		return c.Reason
	}
	return ""
}

// boundWhere says where the roles are bound, for a message.
func boundWhere(p *plan, st oriav1alpha1.ScopeInstanceStatus) string {
	if p.targets.Cluster {
		return fmt.Sprintf("%d ClusterRole(s) bound cluster-wide", len(p.roles))
	}
	if n := st.PartiallyBoundNamespaceCount; n > 0 {
		return fmt.Sprintf("%d ClusterRole(s) bound in %d namespace(s), in part in %d more", len(p.roles), len(st.BoundNamespaces), n)
	}
	return fmt.Sprintf("%d ClusterRole(s) bound in %d namespace(s)", len(p.roles), len(st.BoundNamespaces))
}

// partialNamespaces counts the namespaces not in bound (sorted) where some
// intended RoleBinding is in place (ensured: the outcomes of the intended
// RoleBindings).
func partialNamespaces(bound []string, ensured []engine.Outcome) int {
	var some map[string]bool
	for _, o := range ensured {
		switch o.Action {
		case engine.Unchanged, engine.Created, engine.Updated, engine.Replaced:
			if _, in := slices.BinarySearch(bound, o.Namespace); in || o.Namespace == "" {
				continue
			}
			if some == nil {
				some = map[string]bool{}
			}
			some[o.Namespace] = true
		}
	}
	return len(some)
}

// errorList joins the first max errors' messages.
func errorList(errs []error, max int) string {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return status.Enumerate(msgs, max)
}
