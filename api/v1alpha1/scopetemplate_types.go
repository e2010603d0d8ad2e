package v1alpha1

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ScopeTemplateSpec defines a set of ClusterRoles and the subjects that a
// ScopeInstance binds them to.
type ScopeTemplateSpec struct {
	// clusterRoles are the roles the template grants. Each is either defined
	// inline (rules, with a name or a generateName prefix), in which case oria
	// creates it while at least one ScopeInstance uses the template, or a
	// reference to an existing ClusterRole (a name and no rules).
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	ClusterRoles []ClusterRoleTemplate `json:"clusterRoles"`

	// bindingTemplate holds the subjects every generated RoleBinding or
	// ClusterRoleBinding names.
	// +required
	BindingTemplate BindingTemplate `json:"bindingTemplate"`
}

// ClusterRoleTemplate is one role of a ScopeTemplate.
//
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.generateName)",message="exactly one of name or generateName must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.generateName) || (has(self.rules) && size(self.rules) > 0)",message="generateName needs rules: only an inline role can have a generated name"
type ClusterRoleTemplate struct {
	// name is the exact ClusterRole name. With rules, oria creates the role
	// under this name; without rules, it refers to an existing ClusterRole
	// (for example a role an operator bundle or oria's extension controller
	// provides), which oria binds but never changes.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// generateName is a name prefix for an inline role. Unlike
	// metadata.generateName the suffix is not random: oria appends a short
	// hash of the template name and prefix, so the name is the same on every
	// reconcile and across restarts.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	GenerateName string `json:"generateName,omitempty"`

	// rules are the policy rules of an inline role. They may name
	// cluster-scoped resources and non-resource URLs; such rules take effect
	// only where the template is bound cluster-wide, because a RoleBinding
	// grants namespaced access only.
	// +optional
	// +listType=atomic
	Rules []rbacv1.PolicyRule `json:"rules,omitempty"`
}

// BindingTemplate holds the subjects of the bindings a ScopeInstance creates.
type BindingTemplate struct {
	// subjects are the users, groups and ServiceAccounts to bind. A
	// ServiceAccount without a namespace means the ServiceAccount of that name
	// in each target namespace (as in a RoleBinding); it cannot be bound
	// cluster-wide.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	Subjects []rbacv1.Subject `json:"subjects"`
}

// ScopeTemplateStatus is the observed state of a ScopeTemplate.
type ScopeTemplateStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready says whether the template is valid and its inline
	// ClusterRoles are in place.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// instances are the names of the ScopeInstances that use the template.
	// +optional
	// +listType=set
	Instances []string `json:"instances,omitempty"`

	// clusterRoles are the names of the ClusterRoles the template binds, in
	// spec order: generated names for inline roles, given names otherwise.
	// +optional
	// +listType=atomic
	ClusterRoles []string `json:"clusterRoles,omitempty"`
}

// ScopeTemplate defines ClusterRoles and subjects that ScopeInstances bind in
// chosen namespaces or cluster-wide.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=st,categories=oria
// +kubebuilder:printcolumn:name=Roles,type=string,JSONPath=`.spec.clusterRoles[*].name`,priority=1
// +kubebuilder:printcolumn:name=Subjects,type=string,JSONPath=`.spec.bindingTemplate.subjects[*].name`,priority=1
// +kubebuilder:printcolumn:name=Ready,type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name=Reason,type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name=Age,type=date,JSONPath=`.metadata.creationTimestamp`
type ScopeTemplate struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ScopeTemplateSpec `json:"spec"`
	// +optional
	Status ScopeTemplateStatus `json:"status,omitempty"`
}

// ScopeTemplateList is a list of ScopeTemplates.
//
// +kubebuilder:object:root=true
type ScopeTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ScopeTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ScopeTemplate{}, &ScopeTemplateList{})
}
