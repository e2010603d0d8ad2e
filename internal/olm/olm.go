// Package olm is the one definition of what oria relies on in OLM v1's
// contract: operator-controller labels everything it installs for a
// ClusterExtension (CRDs, bundle ClusterRoles, ...) with
// olm.operatorframework.io/owner-kind=ClusterExtension and
// olm.operatorframework.io/owner-name=<extension>, with both its appliers
// (Helm and Boxcutter). "Which extension installed this" is answered here
// and nowhere else.
package olm

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// OwnerLabels are the labels operator-controller puts on what it installs
// for the named ClusterExtension.
func OwnerLabels(extension string) map[string]string {
	return map[string]string{
		oriav1alpha1.LabelOLMOwnerKind: oriav1alpha1.OLMOwnerKindClusterExtension,
		oriav1alpha1.LabelOLMOwnerName: extension,
	}
}

// InstalledByExtension selects what operator-controller installed for any
// ClusterExtension (a cache's or a watch's label selector).
func InstalledByExtension() labels.Selector {
	return labels.SelectorFromSet(labels.Set{oriav1alpha1.LabelOLMOwnerKind: oriav1alpha1.OLMOwnerKindClusterExtension})
}

// ExtensionOf returns the name of the ClusterExtension operator-controller
// installed obj for, or "" when it did not install it for one.
func ExtensionOf(obj metav1.Object) string {
	l := obj.GetLabels()
	if l[oriav1alpha1.LabelOLMOwnerKind] != oriav1alpha1.OLMOwnerKindClusterExtension {
		return ""
	}
	return l[oriav1alpha1.LabelOLMOwnerName]
}
