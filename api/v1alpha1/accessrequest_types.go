package v1alpha1

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RequestState is where an AccessRequest is in its life.
// +kubebuilder:validation:Enum=Requested;Active;Denied;Cancelled;Expired;Ended
type RequestState string

// The states of an AccessRequest. Requested is the only one that waits for
// a decision; Active is the only one that grants; the others are final.
const (
	// StateRequested: waiting for an approver.
	StateRequested RequestState = "Requested"
	// StateActive: approved (or self-activated); the grant is in force
	// from status.startsAt to status.endsAt.
	StateActive RequestState = "Active"
	// StateDenied: an approver denied it.
	StateDenied RequestState = "Denied"
	// StateCancelled: ended before approval (by the requester or an admin,
	// or because its policy went away or no longer allows it).
	StateCancelled RequestState = "Cancelled"
	// StateExpired: never approved within the policy's requestTimeout.
	StateExpired RequestState = "Expired"
	// StateEnded: was active; its time is up, or it was ended early, or
	// its policy no longer allows it.
	StateEnded RequestState = "Ended"
)

// AccessRequestSpec is one request to activate an eligible RBACPolicy
// (see Eligibility): who asks, where, for how long and why. It is written
// once, at creation, and never changed: a new activation is a new request.
// Identities are not taken from it: the escalation guard admits a request
// only if spec.requester is the user the API server authenticated as its
// creator, and that user is one of the policy's subjects.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="an AccessRequest is one immutable record: its spec is never changed (a new activation is a new request)"
type AccessRequestSpec struct {
	// policyName names the eligible RBACPolicy to activate.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	PolicyName string `json:"policyName"`

	// requester is the user making the request, exactly as the API server
	// authenticates them (the guard refuses any other value). The grant
	// goes to this user, never to a group.
	// +required
	// +kubebuilder:validation:MinLength=1
	Requester string `json:"requester"`

	// eligibleAs is the subject of the policy through which the requester
	// is eligible: a Group they belong to when they make the request, or
	// their own User. Absent: their own User. When the policy no longer
	// lists it, the activation ends.
	// +optional
	EligibleAs *rbacv1.Subject `json:"eligibleAs,omitempty"`

	// namespaces are where to activate the grant: some of the policy's
	// namespaces (any namespaces when the policy is cluster-wide).
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespaces []string `json:"namespaces"`

	// duration is how long the grant lasts once approved: more than zero,
	// at most the policy's eligibility.maxDuration; whole seconds.
	// +required
	Duration metav1.Duration `json:"duration"`

	// reason says why (required when the policy says so, and for
	// self-activation).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
}

// AccessRequestStatus is what oria made of a request; written by oria
// alone.
type AccessRequestStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// state is where the request is: Requested, Active, Denied, Cancelled,
	// Expired or Ended.
	// +optional
	State RequestState `json:"state,omitempty"`

	// conditions: Active says whether the grant is in force, and why not.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// approvedBy and deniedBy name who decided (from the guard-checked
	// annotations), endedBy who ended or cancelled it ("oria" when its
	// time ran out or its policy no longer allows it).
	// +optional
	ApprovedBy string `json:"approvedBy,omitempty"`
	// +optional
	DeniedBy string `json:"deniedBy,omitempty"`
	// +optional
	EndedBy string `json:"endedBy,omitempty"`

	// startsAt and endsAt bound the grant (approval to approval plus
	// duration, whole seconds); endedAt is when it ended or was decided
	// to end.
	// +optional
	StartsAt *metav1.Time `json:"startsAt,omitempty"`
	// +optional
	EndsAt *metav1.Time `json:"endsAt,omitempty"`
	// +optional
	EndedAt *metav1.Time `json:"endedAt,omitempty"`

	// namespaces are where the grant is in force while Active.
	// +optional
	// +listType=atomic
	Namespaces []string `json:"namespaces,omitempty"`

	// scopeInstanceName names the ScopeInstance that carries the grant
	// while Active (accessrequest-<request>).
	// +optional
	ScopeInstanceName string `json:"scopeInstanceName,omitempty"`
}

// AccessRequest asks for one time-bound activation of an eligible
// RBACPolicy for the user who creates it. See AccessRequestSpec.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=accessreq,categories=oria
// +kubebuilder:printcolumn:name=Requester,type=string,JSONPath=`.spec.requester`
// +kubebuilder:printcolumn:name=Policy,type=string,JSONPath=`.spec.policyName`
// +kubebuilder:printcolumn:name=Namespaces,type=string,JSONPath=`.spec.namespaces`
// +kubebuilder:printcolumn:name=Duration,type=string,JSONPath=`.spec.duration`
// +kubebuilder:printcolumn:name=State,type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name=Approver,type=string,JSONPath=`.status.approvedBy`
// +kubebuilder:printcolumn:name=Ends,type=string,JSONPath=`.status.endsAt`
// +kubebuilder:printcolumn:name=Reason,type=string,JSONPath=`.spec.reason`,priority=1
// +kubebuilder:printcolumn:name=Age,type=date,JSONPath=`.metadata.creationTimestamp`
type AccessRequest struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec AccessRequestSpec `json:"spec"`
	// +optional
	Status AccessRequestStatus `json:"status,omitempty"`
}

// AccessRequestList is a list of AccessRequests.
//
// +kubebuilder:object:root=true
type AccessRequestList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AccessRequest `json:"items"`
}

func init() {
	SchemeBuilder.Register(&AccessRequest{}, &AccessRequestList{})
}
