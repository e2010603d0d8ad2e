// Package v1alpha1 contains the oria.operatorframework.io/v1alpha1 API: the
// ScopeTemplate / ScopeInstance binding layer and RBACPolicy, plus the label,
// annotation, condition type and reason constants that oria's objects and the
// ClusterExtensions it manages carry.
//
// +kubebuilder:object:generate=true
// +kubebuilder:ac:generate=true
// +kubebuilder:ac:output:package=../applyconfiguration
// +groupName=oria.operatorframework.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every oria kind.
	GroupVersion = schema.GroupVersion{Group: "oria.operatorframework.io", Version: "v1alpha1"}

	// SchemeGroupVersion is an alias of GroupVersion for generated code
	// (apply configurations) that expects the client-go spelling.
	SchemeGroupVersion = GroupVersion

	// SchemeBuilder registers the oria kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the oria kinds to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
