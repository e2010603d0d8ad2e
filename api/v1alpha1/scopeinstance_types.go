package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Scope values reported in ScopeInstance and RBACPolicy status.
const (
	// ScopeCluster: the roles are bound with ClusterRoleBindings.
	ScopeCluster = "Cluster"
	// ScopeNamespaces: the roles are bound with RoleBindings in the target
	// namespaces.
	ScopeNamespaces = "Namespaces"
)

// ScopeInstanceSpec names a ScopeTemplate and where to bind it.
//
// The target namespaces are the union of namespaces and the namespaces that
// namespaceSelector matches. With neither field set the template is bound
// cluster-wide, with one ClusterRoleBinding per role. A selector that matches
// no namespace binds nothing (it never widens to cluster-wide).
type ScopeInstanceSpec struct {
	// scopeTemplateName is the name of the ScopeTemplate to bind.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ScopeTemplateName string `json:"scopeTemplateName"`

	// namespaces lists namespaces to bind the template in. A namespace that
	// does not exist yet is reported and bound as soon as it is created.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespaces []string `json:"namespaces,omitempty"`

	// namespaceSelector selects namespaces by label; matchExpressions are
	// supported. An empty selector ({}) matches every namespace. For
	// compatibility with the ScopeInstance design document, keys other than
	// matchLabels and matchExpressions are read as labels the namespace must
	// have: `namespaceSelector: {team: a}` means `matchLabels: {team: a}`.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// serviceAccount caps what this instance can grant (attenuation, as OLM
	// v0's OperatorGroup serviceAccountName): oria writes the instance's
	// RoleBindings and ClusterRoleBindings impersonating this
	// ServiceAccount, so the API server grants only what the ServiceAccount
	// itself could (it needs create, update and patch on the bindings where
	// they go, and may bind only roles it may `bind` or whose permissions it
	// holds there). A refused binding is reported (Ready=False, Forbidden)
	// and tried again; the others are written. Naming a ServiceAccount
	// requires the right to impersonate it.
	// +optional
	ServiceAccount *ServiceAccountReference `json:"serviceAccount,omitempty"`
}

// ServiceAccountReference names a ServiceAccount.
type ServiceAccountReference struct {
	// namespace of the ServiceAccount.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`
	// name of the ServiceAccount.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// Username is the name the API server knows the ServiceAccount by:
// "system:serviceaccount:<namespace>:<name>".
func (r ServiceAccountReference) Username() string {
	return "system:serviceaccount:" + r.Namespace + ":" + r.Name
}

// ScopeInstanceStatus is the observed state of a ScopeInstance.
type ScopeInstanceStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready says whether every binding is in place, and if not,
	// why (TemplateNotFound, InvalidSelector, NamespaceNotFound, Conflict,
	// Progressing, ...).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// scope is Cluster when the template is bound cluster-wide, Namespaces
	// when it is bound in namespaces.
	// +optional
	// +kubebuilder:validation:Enum=Cluster;Namespaces
	Scope string `json:"scope,omitempty"`

	// boundNamespaces are the namespaces in which every RoleBinding exists,
	// sorted. The list is atomic (written whole by oria alone): a set of
	// thousands of namespaces would make every status write track each
	// entry in managedFields.
	// +optional
	// +listType=atomic
	BoundNamespaces []string `json:"boundNamespaces,omitempty"`

	// boundNamespaceCount is the length of boundNamespaces.
	// +optional
	BoundNamespaceCount int32 `json:"boundNamespaceCount,omitempty"`
}

// ScopeInstance binds a ScopeTemplate's roles to its subjects in a set of
// namespaces, or cluster-wide.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=si
// +kubebuilder:printcolumn:name=Template,type=string,JSONPath=`.spec.scopeTemplateName`
// +kubebuilder:printcolumn:name=Scope,type=string,JSONPath=`.status.scope`
// +kubebuilder:printcolumn:name=Namespaces,type=integer,JSONPath=`.status.boundNamespaceCount`
// +kubebuilder:printcolumn:name=Ready,type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name=Reason,type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name=Age,type=date,JSONPath=`.metadata.creationTimestamp`
type ScopeInstance struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ScopeInstanceSpec `json:"spec"`
	// +optional
	Status ScopeInstanceStatus `json:"status,omitempty"`
}

// ScopeInstanceList is a list of ScopeInstances.
//
// +kubebuilder:object:root=true
type ScopeInstanceList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ScopeInstance `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ScopeInstance{}, &ScopeInstanceList{})
}
