package v1alpha1

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Access is the level of access an RBACPolicy grants.
// +kubebuilder:validation:Enum=view;edit;admin
type Access string

const (
	// AccessView grants get, list and watch on the resources and get on their
	// CustomResourceDefinitions.
	AccessView Access = "view"
	// AccessEdit grants view plus create, update, patch and delete.
	AccessEdit Access = "edit"
	// AccessAdmin grants every verb on the resources, and get on their
	// CustomResourceDefinitions.
	AccessAdmin Access = "admin"
)

// APIRef names one API (a CustomResourceDefinition) of an extension.
type APIRef struct {
	// group is the API group, for example argoproj.io.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group"`
	// resource is the plural resource name, for example applications.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Resource string `json:"resource"`
}

// RBACPolicySpec grants subjects access to the APIs of one ClusterExtension.
//
// The namespaces are either the listed namespaces or those that
// namespaceSelector matches: the two fields are mutually exclusive (the API
// server refuses an object with both, so a write merged into someone else's
// object fails loudly instead of adding to it). With neither the grant is
// cluster-wide.
//
// Every field that decides what is granted where (namespaces, the selector,
// the ServiceAccount, subjects, APIs) is atomic under server-side apply: when the manager
// that set it removes a grant, the grant goes, even if another manager
// applied the same value too (or the apply conflicts, loudly).
//
// notBefore and expiresAt bound the time the grant is in force (see
// ScopeInstanceSpec); the compiled ScopeInstance carries them.
//
// +kubebuilder:validation:XValidation:rule="!has(self.namespaces) || size(self.namespaces) == 0 || !has(self.namespaceSelector)",message="namespaces and namespaceSelector are mutually exclusive: list the namespaces or select them by label, not both (with neither, the grant is cluster-wide)",fieldPath=".namespaceSelector",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.eligibility) || !has(self.namespaceSelector)",message="an eligible policy lists its namespaces (or none: every namespace); a request names a subset of them",fieldPath=".eligibility",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.notBefore) || !has(self.expiresAt) || !(self.expiresAt >= timestamp('1970-01-01T00:00:00Z') && self.expiresAt <= timestamp('9999-12-31T23:59:59Z')) || timestamp(int(self.expiresAt) - 1) >= self.notBefore",message="spec.expiresAt must be at least one whole second after spec.notBefore once both are in whole seconds (notBefore rounded up, expiresAt rounded down, as oria applies them): this window would never open",fieldPath=".expiresAt",reason=FieldValueInvalid
type RBACPolicySpec struct {
	// extensionName is the name of the ClusterExtension whose APIs to grant.
	// The extension must be in FineGrained (or Legacy) mode so that its
	// ClusterRoles exist.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ExtensionName string `json:"extensionName"`

	// access is the level granted on each covered API: view (get, list,
	// watch), edit (view plus create, update, patch, delete) or admin (every
	// verb, "*"). Each level also grants get on the API's own
	// CustomResourceDefinition, as OLM v0 did (`kubectl explain` needs no
	// grant: it reads the schema every authenticated user may read).
	// +required
	Access Access `json:"access"`

	// subjects are the users, groups and ServiceAccounts to grant access to.
	// A ServiceAccount needs its namespace.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	Subjects []rbacv1.Subject `json:"subjects"`

	// namespaces lists namespaces to grant access in. Not with
	// namespaceSelector.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespaces []string `json:"namespaces,omitempty"`

	// namespaceSelector selects namespaces to grant access in by label. Not
	// with namespaces.
	// +optional
	// +structType=atomic
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// apis narrows the grant to some of the extension's APIs. Empty means
	// all of them, including APIs a later upgrade of the extension adds.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	APIs []APIRef `json:"apis,omitempty"`

	// serviceAccount caps what the policy can grant: it is passed to the
	// ScopeInstance the policy compiles to (see ScopeInstanceSpec), whose
	// bindings oria then writes impersonating this ServiceAccount. Naming a
	// ServiceAccount requires the right to impersonate it.
	// +optional
	// +structType=atomic
	ServiceAccount *ServiceAccountReference `json:"serviceAccount,omitempty"`

	// notBefore (RFC 3339) is when the grant starts: before it the policy
	// grants nothing. Absent: at once. Like expiresAt it must lie between
	// 1970-01-01T00:00:00Z and 9999-12-31T23:59:59Z (in UTC, inclusive),
	// and it is applied in whole seconds: a fraction rounds notBefore up
	// and expiresAt down, never widening the window.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= timestamp('1970-01-01T00:00:00Z') && self <= timestamp('9999-12-31T23:59:59Z')",message="must be an instant from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z (RFC 3339; in UTC after its offset, inclusive): an instant outside does not round-trip (the zero time 0001-01-01T00:00:00Z reads as no bound)",reason=FieldValueInvalid
	NotBefore *metav1.Time `json:"notBefore,omitempty"`

	// expiresAt (RFC 3339) is when the grant ends: from then on the policy
	// grants nothing, and its bindings are deleted (the policy stays, Ready
	// False with reason Expired, as a record). Absent: never. Must be at
	// least one whole second after notBefore once both are in whole
	// seconds (a window that would never open is refused). Moving it later, or removing it, is a new grant,
	// checked by the escalation guard; moving it earlier always is
	// admitted.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= timestamp('1970-01-01T00:00:00Z') && self <= timestamp('9999-12-31T23:59:59Z')",message="must be an instant from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z (RFC 3339; in UTC after its offset, inclusive): an instant outside does not round-trip (the zero time 0001-01-01T00:00:00Z reads as no bound)",reason=FieldValueInvalid
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`

	// eligibility makes the policy's subjects eligible rather than granted:
	// the policy then binds nothing by itself, and each subject activates it
	// for a while with an AccessRequest (approved by someone else, or by
	// themselves with a reason when there are no approvers). See
	// Eligibility. Not with namespaceSelector.
	// +optional
	Eligibility *Eligibility `json:"eligibility,omitempty"`
}

// Eligibility says how a policy's subjects activate it (see AccessRequest).
type Eligibility struct {
	// maxDuration is the longest activation, for example 4h. Required.
	// +required
	MaxDuration metav1.Duration `json:"maxDuration"`

	// approvers are the users and groups who may approve or deny a request
	// (never the requester: two persons). Empty: self-activation, the
	// request is active as soon as it is admitted, and it needs a reason.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Approvers []rbacv1.Subject `json:"approvers,omitempty"`

	// requireReason: a request must say why (spec.reason). Always so for
	// self-activation.
	// +optional
	RequireReason bool `json:"requireReason,omitempty"`

	// requestTimeout is how long a request may wait for approval, after
	// which it is Expired. Absent: 1h.
	// +optional
	RequestTimeout *metav1.Duration `json:"requestTimeout,omitempty"`
}

// RBACPolicyStatus is the observed state of an RBACPolicy.
type RBACPolicyStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready says whether the grant is in place, and if not, why.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// apis are the CustomResourceDefinitions (by name) the grant covers.
	// +optional
	// +listType=set
	APIs []string `json:"apis,omitempty"`

	// scope is Cluster for a cluster-wide grant, Namespaces otherwise.
	// +optional
	// +kubebuilder:validation:Enum=Cluster;Namespaces
	Scope string `json:"scope,omitempty"`

	// boundNamespaces are the namespaces where the grant is in place,
	// sorted. (An atomic list: a set of thousands of entries would be
	// tracked entry by entry in managedFields, making every status write
	// costly.)
	// +optional
	// +listType=atomic
	BoundNamespaces []string `json:"boundNamespaces,omitempty"`

	// boundNamespaceCount is the length of boundNamespaces (0, not absent,
	// when none: kubectl shows 0).
	// +optional
	// +kubebuilder:default=0
	BoundNamespaceCount int32 `json:"boundNamespaceCount"`

	// scopeTemplateName and scopeInstanceName name the objects the policy is
	// compiled into.
	// +optional
	ScopeTemplateName string `json:"scopeTemplateName,omitempty"`
	// scopeInstanceName names the ScopeInstance the policy is compiled into
	// (rbacpolicy-<policy>); its status has the bindings' details.
	// +optional
	ScopeInstanceName string `json:"scopeInstanceName,omitempty"`
}

// RBACPolicy grants users, groups and ServiceAccounts view, edit or admin
// access to the APIs of a ClusterExtension, cluster-wide or in chosen
// namespaces. It is compiled into a ScopeTemplate and a ScopeInstance.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=rbacp,categories=oria
// +kubebuilder:printcolumn:name=Extension,type=string,JSONPath=`.spec.extensionName`
// +kubebuilder:printcolumn:name=Access,type=string,JSONPath=`.spec.access`
// +kubebuilder:printcolumn:name=Scope,type=string,JSONPath=`.status.scope`
// +kubebuilder:printcolumn:name=Namespaces,type=integer,JSONPath=`.status.boundNamespaceCount`
// +kubebuilder:printcolumn:name=Subjects,type=string,JSONPath=`.spec.subjects[*].name`,priority=1
// +kubebuilder:printcolumn:name=Listed,type=string,JSONPath=`.spec.namespaces`,priority=1
// +kubebuilder:printcolumn:name=Ready,type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name=Reason,type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name=Expires,type=string,JSONPath=`.spec.expiresAt`,description="When the grant ends (spec.expiresAt); empty: never"
// +kubebuilder:printcolumn:name=Age,type=date,JSONPath=`.metadata.creationTimestamp`
type RBACPolicy struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec RBACPolicySpec `json:"spec"`
	// +optional
	Status RBACPolicyStatus `json:"status,omitempty"`
}

// RBACPolicyList is a list of RBACPolicies.
//
// +kubebuilder:object:root=true
type RBACPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RBACPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RBACPolicy{}, &RBACPolicyList{})
}
