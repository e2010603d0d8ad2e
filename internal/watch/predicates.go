package watch

import (
	"maps"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// ExtensionChanged passes the ClusterExtension events oria acts on: create,
// delete, and updates that change the spec (generation), the RBAC mode
// annotation (the only annotation oria reads), the labels or the deletion
// timestamp. Status-only writes (operator-controller's conditions, oria's
// own RBACManaged condition) and other annotations (kubectl's
// last-applied-configuration, other tools') do not requeue anything.
func ExtensionChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld, e.ObjectNew
			return o.GetGeneration() != n.GetGeneration() ||
				!annotationEqual(o, n, oriav1alpha1.AnnotationRBACMode) ||
				!maps.Equal(o.GetLabels(), n.GetLabels()) ||
				!o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp())
		},
	}
}

// annotationEqual reports whether a and b have the same value for the
// annotation key, or both lack it.
func annotationEqual(a, b client.Object, key string) bool {
	va, oka := a.GetAnnotations()[key]
	vb, okb := b.GetAnnotations()[key]
	return oka == okb && va == vb
}
