package admission

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
)

// windowFields are the spec fields of a time-bound grant's window, as
// managedFields name them.
var windowFields = []string{"f:notBefore", "f:expiresAt"}

// windowWidened explains a refusal of a change that widens a window.
const windowWidened = "this change widens the grant's window (a later or removed spec.expiresAt, an earlier or removed spec.notBefore), " +
	"which is a new grant, checked as any other; an earlier spec.expiresAt or a later spec.notBefore is always admitted"

// WidensWindow reports whether an update from old (nil on create) to obj
// widens the window of a ScopeInstance or RBACPolicy.
func WidensWindow(old, obj client.Object) bool {
	before, after, ok := windows(old, obj)
	return ok && after.Widens(before)
}

// emptyWindow returns the refusal of a ScopeInstance or RBACPolicy whose
// window is empty as compiled (binding.Window.Empty: no whole second
// between notBefore rounded up and expiresAt rounded down), naming
// spec.expiresAt; "" otherwise. The CRDs' rule refuses it first; this is
// the same judgement in the controllers' own terms.
func emptyWindow(obj client.Object) string {
	var w binding.Window
	var kind string
	switch o := obj.(type) {
	case *oriav1alpha1.ScopeInstance:
		w, kind = binding.InstanceWindow(o.Spec), "ScopeInstance"
	case *oriav1alpha1.RBACPolicy:
		w, kind = binding.PolicyWindow(o.Spec), "RBACPolicy"
	default:
		return ""
	}
	if !w.Empty() {
		return ""
	}
	c := w.Whole()
	return invalidSpec(kind, obj.GetName(), oriav1alpha1.ReasonInvalidSpec, fmt.Sprintf(
		"spec.expiresAt must be at least one whole second after spec.notBefore once both are in whole seconds (notBefore rounded up, expiresAt down, as oria applies them): "+
			"the window would be from %s until %s and never open", binding.Stamp(c.NotBefore), binding.Stamp(c.ExpiresAt)))
}

// windows returns the windows of old and obj, when both are ScopeInstances
// or both RBACPolicies.
func windows(old, obj client.Object) (before, after binding.Window, ok bool) {
	switch o := obj.(type) {
	case *oriav1alpha1.ScopeInstance:
		if prev, is := old.(*oriav1alpha1.ScopeInstance); is && prev != nil {
			return binding.InstanceWindow(prev.Spec), binding.InstanceWindow(o.Spec), true
		}
	case *oriav1alpha1.RBACPolicy:
		if prev, is := old.(*oriav1alpha1.RBACPolicy); is && prev != nil {
			return binding.PolicyWindow(prev.Spec), binding.PolicyWindow(o.Spec), true
		}
	}
	return before, after, false
}

// RevokesOnly reports whether an update from old to obj (a ScopeInstance
// or an RBACPolicy) changes nothing that decides a grant but its window
// (spec.notBefore, spec.expiresAt, their values or who owns them under
// server-side apply), and does not widen it: an earlier expiresAt, an
// expiresAt added, a later notBefore or a notBefore added only take away.
// Such a change is a revocation: the guard admits it for everyone, without
// checking what the object grants, and whatever else is wrong with the
// object, so that the subject of a grant may end it early. A window that
// widens (expiresAt later or removed, notBefore earlier or removed) is a
// grant, checked as any other. Co-owning a bound of the window keeps it in
// place when its other manager removes it, which only narrows. It is pure.
func RevokesOnly(old, obj client.Object) bool {
	before, after, ok := windows(old, obj)
	return ok && !after.Widens(before) &&
		equality.Semantic.DeepEqual(withoutWindow(old), withoutWindow(obj)) &&
		equality.Semantic.DeepEqual(specOwners(old.GetManagedFields(), windowFields...), specOwners(obj.GetManagedFields(), windowFields...))
}

// withoutWindow returns the spec of a ScopeInstance or RBACPolicy with no
// window.
func withoutWindow(obj client.Object) any {
	switch o := obj.(type) {
	case *oriav1alpha1.ScopeInstance:
		spec := o.Spec.DeepCopy()
		spec.NotBefore, spec.ExpiresAt = nil, nil
		return spec
	case *oriav1alpha1.RBACPolicy:
		spec := o.Spec.DeepCopy()
		spec.NotBefore, spec.ExpiresAt = nil, nil
		return spec
	}
	return nil
}
