package scopeinstance

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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
// When gathering failed nothing was decided, and it stays where it was.
func computeStatus(si *oriav1alpha1.ScopeInstance, p *plan, res result, err error) oriav1alpha1.ScopeInstanceStatus {
	st := *si.Status.DeepCopy()
	ready, ok := status.Begin(&st.Conditions, &st.ObservedGeneration, si.Generation, p != nil, err)
	if !ok {
		return st
	}
	switch {
	case p.phase != binding.WindowOpen:
		closedStatus(&st, p, res, err, ready)
		return st
	case p.revoke != nil:
		st.NamespaceUIDs, st.PinnedFor = p.pins, p.pinnedFor
		ready(metav1.ConditionFalse, p.revoke.specErr.Reason, p.revoke.specErr.Message)
		// Bindings its ServiceAccount no longer vouches for went even so.
		st.BoundNamespaces = slices.DeleteFunc(st.BoundNamespaces, func(ns string) bool {
			return slices.ContainsFunc(res.summary.Changed[engine.Deleted], func(o engine.Outcome) bool { return o.Namespace == ns })
		})
		st.BoundNamespaceCount = int32(len(st.BoundNamespaces))
		return st
	}
	boundStatus(&st, si, p, res, err, ready)
	return st
}

// boundStatus is computeStatus inside the window with a valid spec.
func boundStatus(st *oriav1alpha1.ScopeInstanceStatus, si *oriav1alpha1.ScopeInstance, pl *plan, res result, err error, ready status.Ready) {
	p := pl.bind
	st.Scope = oriav1alpha1.ScopeNamespaces
	if p.targets.Cluster {
		st.Scope = oriav1alpha1.ScopeCluster
	}
	st.BoundNamespaces = res.bound
	st.BoundNamespaceCount = int32(len(st.BoundNamespaces))
	st.PartiallyBoundNamespaceCount = int32(partialNamespaces(res.bound, res.ensuredRBs))
	st.Publication = res.published.Status
	st.NamespaceUIDs, st.PinnedFor = pl.pins, pl.pinnedFor
	switch {
	case err != nil:
		ready(metav1.ConditionUnknown, oriav1alpha1.ReasonReconcileError, err.Error())
	case len(res.conflicts) > 0:
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonConflict,
			status.Enumerate(res.conflicts, 5)+"; oria leaves such objects alone: remove or rename them")
	case res.refused():
		sa := si.Spec.ServiceAccount
		written := "so they were not written"
		if res.revoked > 0 {
			written = fmt.Sprintf("so they were not written and %d of them, written before, were removed (what their ClusterRole grants changed)", res.revoked)
		}
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonForbidden, fmt.Sprintf(
			"ServiceAccount %s/%s (spec.serviceAccount) may not grant %d binding(s), %s: %s (%s; oria tries again every %s)",
			sa.Namespace, sa.Name, len(res.summary.Forbidden), written, errorList(res.summary.Forbidden, 3), boundWhere(p, *st), cmp.Or(pl.recheck, DefaultRecheckInterval)))
	case len(p.targets.Recreated) > 0:
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonNamespaceRecreated, fmt.Sprintf(
			"namespace(s) %s were deleted and created again since this spec was written: a grant checked for the old namespace is not carried over, "+
				"so they are not bound until the spec is written again other than its window, which the guard checks anew (remove them from spec.namespaces and add them back; a namespaceSelector follows names) (%s)",
			status.Enumerate(p.targets.Recreated, 10), boundWhere(p, *st)))
	case len(p.targets.Missing) > 0:
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonNamespaceNotFound,
			fmt.Sprintf("namespace(s) %s do not exist; they are bound as soon as they are created (bound in %d other namespace(s))",
				status.Enumerate(p.targets.Missing, 10), len(st.BoundNamespaces)))
	case len(p.pending) > 0:
		msg := fmt.Sprintf("waiting for the ScopeTemplate controller to create ClusterRole(s) %s", status.Enumerate(p.pending, 10))
		// If the template says why it cannot, say it here too.
		if c := meta.FindStatusCondition(p.template.Status.Conditions, oriav1alpha1.TypeReady); c != nil && c.Status != metav1.ConditionTrue {
			msg += fmt.Sprintf(" (ScopeTemplate %q: %s: %s)", p.template.Name, c.Reason, c.Message)
		}
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonProgressing, msg)
	case p.withheld > 0:
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonWaitingForRules, fmt.Sprintf(
			"%d binding(s) of ClusterRole(s) %s wait until the role holds ScopeTemplate %q's current rules (no binding is made against rules not checked for it; %s)",
			p.withheld, status.Enumerate(p.ahead, 10), p.template.Name, boundWhere(p, *st)))
	case p.gate != nil && p.gate.want != nil && len(p.gate.missing) > 0:
		// The instance reads the roles its gate copies itself: it knows
		// at once, before the template's own recheck says so.
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonClusterRoleNotFound, fmt.Sprintf(
			"ClusterRole(s) %s of ScopeTemplate %q do not exist: ClusterRole %q, the grant's gate, holds none of their rules, so its bindings grant nothing of them until they are created (%s)",
			status.Enumerate(p.gate.missing, 10), p.template.Name, p.gate.want.Name, boundWhere(p, *st)))
	case templateReason(p.template) == oriav1alpha1.ReasonClusterRoleNotFound:
		c := meta.FindStatusCondition(p.template.Status.Conditions, oriav1alpha1.TypeReady)
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonClusterRoleNotFound,
			fmt.Sprintf("%s, but ScopeTemplate %q: %s", boundWhere(p, *st), p.template.Name, c.Message))
	case res.published.NoNamespace != "":
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonPublicationNamespaceNotFound, fmt.Sprintf(
			"%s, but namespace %q (spec.publication.configMap.namespace) does not exist; the list is published there as soon as it is created", boundWhere(p, *st), res.published.NoNamespace))
	case res.published.Conflict != "":
		ready(metav1.ConditionFalse, oriav1alpha1.ReasonConflict, fmt.Sprintf(
			"%s, but spec.publication: %s; oria leaves it as it is and looks again every %s", boundWhere(p, *st), res.published.Conflict, DefaultRecheckInterval))
	case !p.targets.Cluster && len(st.BoundNamespaces) == 0 && len(p.targets.Namespaces) > 0 && p.gate != nil && p.gate.want != nil && !p.gate.filled():
		// The gate holds no rule: the roles it copies have none.
		ready(metav1.ConditionTrue, oriav1alpha1.ReasonBound, fmt.Sprintf(
			"%d ClusterRole(s) bound in %d namespace(s) through ClusterRole %q, the grant's gate, which holds no rule: the roles it copies grant nothing now%s",
			len(p.roles), len(p.targets.Namespaces), p.gate.want.Name, windowNote(pl)))
	case !p.targets.Cluster && len(st.BoundNamespaces) == 0:
		// A selector that matches nothing yet is a standing rule, not an
		// error; it says so rather than claiming a grant.
		ready(metav1.ConditionTrue, oriav1alpha1.ReasonBound, fmt.Sprintf(
			"%d ClusterRole(s) bound in 0 namespaces%s: no namespace matches yet; namespaces are bound as soon as they match", len(p.roles), windowNote(pl)))
	default:
		ready(metav1.ConditionTrue, oriav1alpha1.ReasonBound, boundWhere(p, *st)+windowNote(pl))
	}
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
func boundWhere(p *bindPlan, st oriav1alpha1.ScopeInstanceStatus) string {
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

// boundNamespaces returns the target namespaces where every intended
// binding is in place (ensured: the outcomes of the intended bindings,
// before any stale one is deleted), sorted. A reconcile computes it once:
// it is both the published list and status.boundNamespaces.
func boundNamespaces(instance string, p *bindPlan, ensured engine.Summary) []string {
	if p.targets.Cluster {
		return nil
	}
	existing := engine.ByKey(p.existingRBs)
	var out []string
	for _, ns := range p.targets.Namespaces {
		if ensured.Bad[ns] || ensured.Skipped[ns] || !pendingBound(instance, ns, p.pending, existing) || !pendingBound(instance, ns, p.ahead, existing) {
			continue
		}
		out = append(out, ns)
	}
	return out
}

// pendingBound reports whether the bindings of the pending roles exist in
// ns (kept from before), so that ns is still fully bound.
func pendingBound(instance, ns string, pending []string, existing map[types.NamespacedName]*rbacv1.RoleBinding) bool {
	for _, role := range pending {
		if _, ok := existing[types.NamespacedName{Namespace: ns, Name: binding.BindingName(instance, role)}]; !ok {
			return false
		}
	}
	return true
}

// recordEvents emits one Event per kind of change with counts (naming the
// first namespaces), never one per namespace.
func (r *Reconciler) recordEvents(si *oriav1alpha1.ScopeInstance, rbs, crbs, delRBs, delCRBs []engine.Outcome, conflicts []string) {
	count := func(action engine.Action, lists ...[]engine.Outcome) (n int, nss map[string]bool) {
		nss = map[string]bool{}
		for _, l := range lists {
			for _, o := range l {
				if o.Action == action {
					n++
					if o.Namespace != "" {
						nss[o.Namespace] = true
					}
				}
			}
		}
		return n, nss
	}
	describe := func(nRB int, nss map[string]bool, nCRB int) string {
		var parts []string
		if nRB > 0 {
			// The namespaces are named (the first few): two changes in
			// different namespaces are two events, not one counted twice.
			names := slices.Sorted(maps.Keys(nss))
			parts = append(parts, fmt.Sprintf("%d RoleBinding(s) in %d namespace(s): %s", nRB, len(nss), status.Enumerate(names, 5)))
		}
		if nCRB > 0 {
			parts = append(parts, fmt.Sprintf("%d ClusterRoleBinding(s)", nCRB))
		}
		return strings.Join(parts, " and ")
	}
	for _, e := range []struct {
		action engine.Action
		reason string
		verb   string
		past   string
		rb     []engine.Outcome
		crb    []engine.Outcome
	}{
		{engine.Created, EventBindingsCreated, "Create", "created", rbs, crbs},
		{engine.Updated, EventBindingsUpdated, "Update", "updated", rbs, crbs},
		{engine.Replaced, EventBindingsReplaced, "Replace", "replaced (roleRef changed)", rbs, crbs},
		{engine.Deleted, EventBindingsDeleted, "Delete", "deleted", delRBs, delCRBs},
	} {
		nRB, nss := count(e.action, e.rb)
		nCRB, _ := count(e.action, e.crb)
		if nRB+nCRB > 0 {
			r.Recorder.Eventf(si, nil, corev1.EventTypeNormal, e.reason, e.verb, "%s %s", e.past, describe(nRB, nss, nCRB))
		}
	}
	// A conflict is news when the instance was not already reporting it;
	// every retry would otherwise repeat the warning.
	if prev := meta.FindStatusCondition(si.Status.Conditions, oriav1alpha1.TypeReady); len(conflicts) > 0 && (prev == nil || prev.Reason != oriav1alpha1.ReasonConflict) {
		r.Recorder.Eventf(si, nil, corev1.EventTypeWarning, EventConflict, "Create", "%s; left unchanged", status.Enumerate(conflicts, 5))
	}
}

// errorList joins the first max errors' messages.
func errorList(errs []error, max int) string {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return status.Enumerate(msgs, max)
}

// summarizeErrors returns one error for many failed writes, naming the
// first few, so a status message stays readable when a thousand namespaces
// fail the same way.
func summarizeErrors(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	if len(errs) <= 3 {
		return errors.Join(errs...)
	}
	msgs := make([]string, 3)
	for i := range msgs {
		msgs[i] = errs[i].Error()
	}
	return fmt.Errorf("%d writes failed, including: %s", len(errs), strings.Join(msgs, "; "))
}
