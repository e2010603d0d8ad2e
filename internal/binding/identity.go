package binding

import (
	"encoding/json"
	"slices"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
)

// A namespace deleted and created again is a new namespace. The escalation
// guard checked an instance's author for the namespaces its spec lists as
// they were when the spec was written: a namespace admin may grant in
// "their" namespace, and loses that right when the namespace is deleted.
// oria therefore records the UID of each listed namespace the first time it
// sees it under the current spec (status.namespaceUIDs) and binds a listed
// namespace only while its UID is the recorded one. A listed namespace that
// did not exist when the spec was written is recorded when it is created
// (only an author with the right in every namespace could list it: the
// guard found no binding of theirs there); one that is deleted and created
// again afterwards is not bound until the spec is written again, which the
// guard checks anew: written again other than in its window (Repin), as a
// write of the window alone may be admitted without a check. A namespaceSelector is checked as a cluster-wide grant,
// so the namespaces it selects follow their names.

// PinKey identifies the part of an instance spec that the pins are
// recorded under (status.pinnedFor): all of it but the window.
func PinKey(spec oriav1alpha1.ScopeInstanceSpec) string {
	spec.NotBefore, spec.ExpiresAt = nil, nil
	b, err := json.Marshal(spec)
	if err != nil {
		// A spec that does not encode (never, for a decoded one) pins anew
		// at every reconcile rather than never.
		return ""
	}
	return names.Hash(string(b))
}

// Repin reports whether the pins of si are to be recorded anew (the fresh
// of PinNamespaces): its spec, less its window, is not the one they were
// recorded under. A change of the window alone never moves a pin: an
// earlier expiresAt or a later notBefore is admitted for everyone without a
// check (a revocation), so a namespace deleted and created again since is
// still the new namespace it was. Pins recorded by an earlier oria (no
// status.pinnedFor) move on any new generation, as they did then.
func Repin(si *oriav1alpha1.ScopeInstance) bool {
	if si.Status.PinnedFor == "" {
		return si.Status.ObservedGeneration != si.Generation
	}
	return si.Status.PinnedFor != PinKey(si.Spec)
}

// PinNamespaces returns the UIDs to record for the namespaces listed
// (spec.namespaces), given every namespace of the cluster, what was recorded
// before (record), and whether the spec is new since the record was made
// (fresh: a new generation, whose write the guard checked). recreated are
// listed namespaces that exist with another UID than the one recorded,
// sorted. A listed namespace that does not exist keeps its record, so that
// its re-creation is noticed.
func PinNamespaces(listed []string, namespaces []Namespace, record map[string]string, fresh bool) (pins map[string]string, recreated []string) {
	if len(listed) == 0 {
		return nil, nil
	}
	uids := make(map[string]string, len(listed))
	for _, n := range listed {
		uids[n] = ""
	}
	for _, ns := range namespaces {
		if _, ok := uids[ns.Name]; ok {
			uids[ns.Name] = ns.UID
		}
	}
	pins = make(map[string]string, len(listed))
	for name, uid := range uids {
		was, recorded := record[name]
		switch {
		case fresh || !recorded:
			if uid != "" {
				pins[name] = uid
			}
		case uid != "" && uid != was:
			pins[name] = was
			recreated = append(recreated, name)
		default:
			pins[name] = was
		}
	}
	if len(pins) == 0 {
		pins = nil
	}
	slices.Sort(recreated)
	return pins, recreated
}

// Without returns t less the recreated namespaces (see PinNamespaces),
// which it lists in Recreated.
func (t Targets) Without(recreated []string) Targets {
	if len(recreated) == 0 {
		return t
	}
	drop := func(ns string) bool { return slices.Contains(recreated, ns) }
	t.Namespaces = slices.DeleteFunc(slices.Clone(t.Namespaces), drop)
	t.Terminating = slices.DeleteFunc(slices.Clone(t.Terminating), drop)
	t.Recreated = recreated
	return t
}
