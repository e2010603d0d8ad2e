package ownership

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// authorityLabels are the label keys that say, on one of oria's own kinds,
// which oria object it belongs to: the controllers select by them (a
// policy's compiled objects, an instance's bindings), so only oria and
// unrestricted users may set, change or remove them.
var authorityLabels = []string{
	oriav1alpha1.LabelManaged,
	oriav1alpha1.LabelExtension,
	oriav1alpha1.LabelScopeTemplate,
	oriav1alpha1.LabelScopeInstance,
	oriav1alpha1.LabelRBACPolicy,
	oriav1alpha1.LabelRole,
}

// CompiledFrom returns the name of the RBACPolicy that obj (a ScopeTemplate
// or ScopeInstance) was compiled from, or "" when it is nobody's compiled
// object: its controller reference to an RBACPolicy, else its rbac-policy
// label.
func CompiledFrom(obj metav1.Object) string {
	if name := ControllerName(obj.GetOwnerReferences(), KindRBACPolicy); name != "" {
		return name
	}
	return obj.GetLabels()[oriav1alpha1.LabelRBACPolicy]
}

// AuthorityChanges lists the changes from old to obj (old nil on create) of
// the metadata oria derives ownership or authority from, on one of oria's
// own kinds: an ownership label set, changed or removed; a controller
// reference to one of oria's kinds set or changed; a finalizer added (a
// finalizer keeps an object, and what it grants, past its deletion). Only
// oria and unrestricted users may make them: a controller never trusts
// metadata that the escalation guard did not check.
func AuthorityChanges(old, obj metav1.Object) []string {
	var oldLabels map[string]string
	var oldFinalizers []string
	var oldRefs []metav1.OwnerReference
	if old != nil {
		oldLabels, oldFinalizers, oldRefs = old.GetLabels(), old.GetFinalizers(), old.GetOwnerReferences()
	}
	var out []string
	for _, k := range authorityLabels {
		before, hadIt := oldLabels[k]
		after, hasIt := obj.GetLabels()[k]
		switch {
		case hasIt && !hadIt:
			out = append(out, fmt.Sprintf("sets label %s=%s", k, strconv.Quote(after)))
		case hadIt && !hasIt:
			out = append(out, fmt.Sprintf("removes label %s", k))
		case hasIt && before != after:
			out = append(out, fmt.Sprintf("changes label %s to %s", k, strconv.Quote(after)))
		}
	}
	if ref := oriaController(obj.GetOwnerReferences()); ref != nil {
		if before := oriaController(oldRefs); before == nil || before.UID != ref.UID || before.Kind != ref.Kind || before.Name != ref.Name {
			out = append(out, fmt.Sprintf("sets a controller reference to %s %q", ref.Kind, ref.Name))
		}
	}
	for _, f := range obj.GetFinalizers() {
		if !slices.Contains(oldFinalizers, f) {
			out = append(out, fmt.Sprintf("adds finalizer %q", f))
		}
	}
	return out
}

// oriaController returns the controller reference among refs when it names
// one of oria's kinds.
func oriaController(refs []metav1.OwnerReference) *metav1.OwnerReference {
	c := controller(refs)
	if c == nil {
		return nil
	}
	for _, kind := range []string{KindRBACPolicy, KindScopeTemplate, KindScopeInstance} {
		if ControllerName(refs, kind) != "" {
			return c
		}
	}
	return nil
}

// Releases reports whether obj differs from old (both one of oria's kinds)
// only by owner references and finalizers it dropped, and in the fields the
// API server keeps (resourceVersion, managedFields, generation): what the
// garbage collector does when an owner is gone or deleted with orphaning.
// removed returns the owner references dropped.
func Releases(old, obj metav1.Object) (removed []metav1.OwnerReference, ok bool) {
	for _, f := range obj.GetFinalizers() {
		if !slices.Contains(old.GetFinalizers(), f) {
			return nil, false
		}
	}
	for _, r := range obj.GetOwnerReferences() {
		if !slices.ContainsFunc(old.GetOwnerReferences(), func(o metav1.OwnerReference) bool { return o.UID == r.UID }) {
			return nil, false
		}
	}
	for _, r := range old.GetOwnerReferences() {
		if !slices.ContainsFunc(obj.GetOwnerReferences(), func(o metav1.OwnerReference) bool { return o.UID == r.UID }) {
			removed = append(removed, r)
		}
	}
	return removed, maps.Equal(old.GetLabels(), obj.GetLabels()) && maps.Equal(old.GetAnnotations(), obj.GetAnnotations())
}
