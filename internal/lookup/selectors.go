package lookup

import (
	"k8s.io/apimachinery/pkg/labels"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// ManagedSelector selects the objects oria created: the only RBAC objects
// its cache holds.
func ManagedSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{oriav1alpha1.LabelManaged: oriav1alpha1.ManagedValue})
}

// PublishedSelector selects the ConfigMaps ScopeInstances publish into: the
// only ConfigMaps the cache holds.
func PublishedSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{oriav1alpha1.LabelPublished: "true"})
}
