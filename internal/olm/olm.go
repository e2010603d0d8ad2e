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

// AdoptionLabels and AdoptionAnnotations are the metadata Helm requires on
// an existing object before the release of the named ClusterExtension,
// installed in namespace, may adopt it (Helm's pkg/action/validate.go:
// app.kubernetes.io/managed-by=Helm and the release's name and namespace).
// operator-controller's Helm applier names a ClusterExtension's release
// after the extension and puts it in spec.namespace.
//
// oria's generated roles carry them. A bundle may ship, in a later version,
// a ClusterRole under a name oria generated because an earlier version did
// not ship it (or, with the mode set at creation, oria may generate a role
// before Helm creates the bundle's): Helm then adopts oria's role (at an
// upgrade it checks only objects new to the release, at an install every
// object) instead of refusing the whole release, and updates it in place to
// the bundle's rules. The adopted role carries operator-controller's owner
// labels from then on, which makes it the bundle's role to oria
// (ownership.IsBundleRole), and oria gives up its fields on it.
func AdoptionLabels() map[string]string {
	return map[string]string{oriav1alpha1.LabelManagedBy: oriav1alpha1.ManagedByHelm}
}

// AdoptionAnnotations: see AdoptionLabels.
func AdoptionAnnotations(extension, namespace string) map[string]string {
	return map[string]string{
		oriav1alpha1.AnnotationHelmReleaseName:      extension,
		oriav1alpha1.AnnotationHelmReleaseNamespace: namespace,
	}
}
