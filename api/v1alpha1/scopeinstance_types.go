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
// The target namespaces are either the listed namespaces or those that
// namespaceSelector matches: the two fields are mutually exclusive (the API
// server refuses an object with both, so a write merged into someone else's
// object, such as an apply onto a name created beforehand, fails loudly
// instead of adding its selector to their list). With neither field set the
// template is bound cluster-wide, with one ClusterRoleBinding per role. A
// selector that matches no namespace binds nothing (it never widens to
// cluster-wide).
//
// Every field that decides what is granted where (namespaces, the selector,
// the ServiceAccount, the publication) is atomic under server-side apply: when the manager
// that set it removes a grant, the grant goes, even if another manager
// applied the same value too (or the apply conflicts, loudly).
//
// notBefore and expiresAt make the grant time-bound: outside
// [notBefore, expiresAt) the instance grants nothing (it has no bindings);
// inside, exactly what it grants without them. The times come from the spec
// alone, so an oria that restarts, or was down across either instant, ends
// in the same state.
//
// +kubebuilder:validation:XValidation:rule="!has(self.namespaces) || size(self.namespaces) == 0 || !has(self.namespaceSelector)",message="namespaces and namespaceSelector are mutually exclusive: list the namespaces or select them by label, not both (with neither, the template is bound cluster-wide)",fieldPath=".namespaceSelector",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.notBefore) || !has(self.expiresAt) || !(self.expiresAt >= timestamp('1970-01-01T00:00:00Z') && self.expiresAt <= timestamp('9999-12-31T23:59:59Z')) || timestamp(int(self.expiresAt) - 1) >= self.notBefore",message="spec.expiresAt must be at least one whole second after spec.notBefore once both are in whole seconds (notBefore rounded up, expiresAt rounded down, as oria applies them): this window would never open",fieldPath=".expiresAt",reason=FieldValueInvalid
type ScopeInstanceSpec struct {
	// scopeTemplateName is the name of the ScopeTemplate to bind.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ScopeTemplateName string `json:"scopeTemplateName"`

	// namespaces lists namespaces to bind the template in. A namespace that
	// does not exist yet is reported and bound as soon as it is created.
	// Not with namespaceSelector.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespaces []string `json:"namespaces,omitempty"`

	// namespaceSelector selects namespaces by label; matchExpressions are
	// supported. An empty selector ({}) matches every namespace. As a
	// shorthand, keys other than matchLabels and matchExpressions are read
	// as labels the namespace must have: `namespaceSelector: {team: a}`
	// means `matchLabels: {team: a}`.
	// Not with namespaces.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +structType=atomic
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// serviceAccount caps what this instance can grant (a ceiling, as OLM
	// v0's OperatorGroup serviceAccountName): oria writes the instance's
	// RoleBindings and ClusterRoleBindings impersonating this
	// ServiceAccount, so the API server grants only what the ServiceAccount
	// itself could (it needs create, update and patch on the bindings where
	// they go, and may bind only roles it may `bind` or whose permissions it
	// holds there). A refused binding is reported (Ready=False, Forbidden)
	// and tried again; the others are written. Naming a ServiceAccount
	// requires the right to impersonate it.
	// +optional
	// +structType=atomic
	ServiceAccount *ServiceAccountReference `json:"serviceAccount,omitempty"`

	// publication tells the operator which namespaces to watch (after IBM's
	// NamespaceScope): oria keeps a key of a ConfigMap equal to the
	// comma-separated, sorted list of namespaces where the instance's
	// bindings are in place (an operator reads it as WATCH_NAMESPACE), and
	// restarts the labelled workloads in the ConfigMap's namespace once per
	// change of the list. Naming a ConfigMap requires the right to write it,
	// and restart labels the right to patch the workloads there.
	// +optional
	// +structType=atomic
	Publication *Publication `json:"publication,omitempty"`

	// notBefore (RFC 3339) is when the grant starts: until then the
	// instance has no bindings (Ready False, reason Pending). Absent: at
	// once. Like expiresAt it must lie between 1970-01-01T00:00:00Z and
	// 9999-12-31T23:59:59Z (in UTC, inclusive), and it is applied in whole
	// seconds: a fraction rounds notBefore up and expiresAt down, never
	// widening the window.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= timestamp('1970-01-01T00:00:00Z') && self <= timestamp('9999-12-31T23:59:59Z')",message="must be an instant from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z (RFC 3339; in UTC after its offset, inclusive): an instant outside does not round-trip (the zero time 0001-01-01T00:00:00Z reads as no bound)",reason=FieldValueInvalid
	NotBefore *metav1.Time `json:"notBefore,omitempty"`

	// expiresAt (RFC 3339) is when the grant ends: oria deletes the
	// instance's bindings at that instant (Ready False, reason Expired,
	// terminal; the instance stays as a record). Absent: never. Must be
	// at least one whole second after notBefore once both are in whole
	// seconds (a window that would never open is refused). Moving it later, or removing it, is a new
	// grant, checked by the escalation guard; moving it earlier always is
	// admitted.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= timestamp('1970-01-01T00:00:00Z') && self <= timestamp('9999-12-31T23:59:59Z')",message="must be an instant from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z (RFC 3339; in UTC after its offset, inclusive): an instant outside does not round-trip (the zero time 0001-01-01T00:00:00Z reads as no bound)",reason=FieldValueInvalid
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
}

// Publication names where an instance publishes its bound namespaces.
type Publication struct {
	// configMap is the ConfigMap and key oria writes. oria owns only that
	// key (server-side apply); other keys are left alone, and a key someone
	// else manages is reported as a Conflict and never overwritten.
	// +required
	ConfigMap ConfigMapKeyReference `json:"configMap"`

	// includeConfigMapNamespace adds the ConfigMap's own namespace (the
	// operator's namespace, where OLM installs the operator's own
	// namespaced permissions) to the list, as NamespaceScope always does.
	// Default true; set false to publish only namespaces this instance
	// binds.
	// +optional
	// +kubebuilder:default=true
	IncludeConfigMapNamespace *bool `json:"includeConfigMapNamespace,omitempty"`

	// restartLabels select the Deployments, StatefulSets and DaemonSets in
	// the ConfigMap's namespace (by their own labels) that oria restarts
	// when the list changes, as `kubectl rollout restart` does. None: no
	// restart.
	// +optional
	// +kubebuilder:validation:MaxProperties=20
	// +mapType=atomic
	RestartLabels map[string]string `json:"restartLabels,omitempty"`
}

// ConfigMapKeyReference names a key of a ConfigMap.
type ConfigMapKeyReference struct {
	// namespace of the ConfigMap.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`
	// name of the ConfigMap.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
	// key of the ConfigMap oria writes the list to.
	// +optional
	// +kubebuilder:default=namespaces
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// DefaultPublicationKey is the ConfigMap key used when none is given.
const DefaultPublicationKey = "namespaces"

// KeyOrDefault returns the key, or DefaultPublicationKey.
func (r ConfigMapKeyReference) KeyOrDefault() string {
	if r.Key == "" {
		return DefaultPublicationKey
	}
	return r.Key
}

// IncludesConfigMapNamespace reports whether the ConfigMap's namespace is
// published (the default).
func (p Publication) IncludesConfigMapNamespace() bool {
	return p.IncludeConfigMapNamespace == nil || *p.IncludeConfigMapNamespace
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
	// entry in managedFields. While only this list changes (Ready stays
	// Bound) it is written at most once a second; bindings are not held
	// back.
	// +optional
	// +listType=atomic
	BoundNamespaces []string `json:"boundNamespaces,omitempty"`

	// boundNamespaceCount is the length of boundNamespaces (0, not absent,
	// when none: kubectl shows 0).
	// +optional
	// +kubebuilder:default=0
	BoundNamespaceCount int32 `json:"boundNamespaceCount"`

	// partiallyBoundNamespaceCount is the number of target namespaces where
	// some of the instance's RoleBindings are in place but not all (a
	// ServiceAccount ceiling refuses the others, or they failed): they
	// grant part of the template there, and are not in boundNamespaces
	// (nor published).
	// +optional
	PartiallyBoundNamespaceCount int32 `json:"partiallyBoundNamespaceCount,omitempty"`

	// publication reports what spec.publication published and the last
	// restart it caused.
	// +optional
	// +structType=atomic
	Publication *PublicationStatus `json:"publication,omitempty"`

	// namespaceUIDs records the UID of each namespace in spec.namespaces
	// as oria first saw it under the current spec. A listed namespace
	// deleted and created again is a new namespace: it is not bound (Ready
	// False, NamespaceRecreated) until the spec is written again other than
	// its window (see pinnedFor), which the escalation guard checks anew.
	// Written by oria alone.
	// +optional
	// +mapType=atomic
	NamespaceUIDs map[string]string `json:"namespaceUIDs,omitempty"`

	// pinnedFor identifies the spec, less its window, that namespaceUIDs
	// were recorded under (a hash). oria records the UIDs anew only when
	// that part of the spec changes: a write that changes only the window
	// may be admitted without a check (an earlier end is a revocation
	// anyone may make), so it never moves a pin. Written by oria alone.
	// +optional
	PinnedFor string `json:"pinnedFor,omitempty"`
}

// PublicationStatus is the observed state of a publication.
type PublicationStatus struct {
	// configMap is "<namespace>/<name>:<key>" of the published key.
	// +optional
	ConfigMap string `json:"configMap,omitempty"`
	// namespaces is the number of namespaces in the published list.
	// +optional
	Namespaces int32 `json:"namespaces,omitempty"`
	// hash identifies the published list (a hash of the value).
	// +optional
	Hash string `json:"hash,omitempty"`
	// lastChangeTime is when oria last wrote a new list.
	// +optional
	LastChangeTime *metav1.Time `json:"lastChangeTime,omitempty"`
	// pendingSince is when the list first changed after the last restart;
	// empty when the workloads run with the published list.
	// +optional
	PendingSince *metav1.Time `json:"pendingSince,omitempty"`
	// restartedHash is the hash of the list the workloads were last
	// restarted for (their oria.operatorframework.io/restarted-for
	// annotation).
	// +optional
	RestartedHash string `json:"restartedHash,omitempty"`
	// lastRestartTime is when oria last restarted the workloads.
	// +optional
	LastRestartTime *metav1.Time `json:"lastRestartTime,omitempty"`
	// lastRestartNamespaces is the size of the list at the last restart.
	// +optional
	LastRestartNamespaces int32 `json:"lastRestartNamespaces,omitempty"`
	// restartedWorkloads are the workloads of the last restart, as
	// "<Kind>/<name>".
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	RestartedWorkloads []string `json:"restartedWorkloads,omitempty"`
}

// ScopeInstance binds a ScopeTemplate's roles to its subjects in a set of
// namespaces, or cluster-wide.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=si,categories=oria
// +kubebuilder:printcolumn:name=Template,type=string,JSONPath=`.spec.scopeTemplateName`
// +kubebuilder:printcolumn:name=Scope,type=string,JSONPath=`.status.scope`
// +kubebuilder:printcolumn:name=Namespaces,type=integer,JSONPath=`.status.boundNamespaceCount`
// +kubebuilder:printcolumn:name=Partial,type=integer,JSONPath=`.status.partiallyBoundNamespaceCount`
// +kubebuilder:printcolumn:name=Published,type=integer,JSONPath=`.status.publication.namespaces`,priority=1
// +kubebuilder:printcolumn:name=Restarted,type=date,JSONPath=`.status.publication.lastRestartTime`,priority=1
// +kubebuilder:printcolumn:name=Ready,type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name=Reason,type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name=Expires,type=string,JSONPath=`.spec.expiresAt`,description="When the grant ends (spec.expiresAt); empty: never"
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
