package engine

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// ScopeTemplateKind is how the engine writes the ScopeTemplates oria
// compiles from RBACPolicies.
var ScopeTemplateKind = compiledKind("ScopeTemplate",
	func() *oriav1alpha1.ScopeTemplate { return &oriav1alpha1.ScopeTemplate{} },
	func(o *oriav1alpha1.ScopeTemplate) any { return &o.Spec },
	func(out, want *oriav1alpha1.ScopeTemplate) { out.Spec = *want.Spec.DeepCopy() })

// ScopeInstanceKind is how the engine writes the ScopeInstances oria
// compiles from RBACPolicies.
var ScopeInstanceKind = compiledKind("ScopeInstance",
	func() *oriav1alpha1.ScopeInstance { return &oriav1alpha1.ScopeInstance{} },
	func(o *oriav1alpha1.ScopeInstance) any { return &o.Spec },
	func(out, want *oriav1alpha1.ScopeInstance) { out.Spec = *want.Spec.DeepCopy() })

// compiledKind describes one of oria's own kinds that oria writes whole: the
// spec must end up exactly as computed, whatever other field managers own.
// A forced server-side apply cannot promise that (it takes over the fields
// it names and leaves the fields only others own, such as a selector someone
// added to a compiled instance), so a drifted object is always repaired with
// an Update of the whole spec, which replaces it; the resourceVersion of the
// object read makes a concurrent change fail the write rather than be lost.
func compiledKind[T interface {
	*oriav1alpha1.ScopeTemplate | *oriav1alpha1.ScopeInstance
	client.Object
}](name string, newT func() T, spec func(T) any, setSpec func(out, want T)) Kind[T] {
	return Kind[T]{
		Name:    name,
		New:     newT,
		Replace: Never[T],
		UpToDate: func(cur, want T) bool {
			return metaUpToDate(cur, want) && equality.Semantic.DeepEqual(spec(cur), spec(want))
		},
		Merge: func(cur, want T) (T, bool) {
			out := cur.DeepCopyObject().(T)
			mergeMeta(out, want, nil)
			setSpec(out, want)
			return out, true
		},
	}
}
