package v1alpha1

// Condition types. Every oria kind reports TypeReady; the ClusterExtensions
// oria manages get TypeRBACManaged, written with oria's own field owner so it
// coexists with operator-controller's conditions.
const (
	// TypeReady is True when everything an oria object asks for is in place.
	TypeReady = "Ready"
	// TypeRBACManaged is oria's condition on a ClusterExtension: True (reason
	// = the mode) when the extension's ClusterRoles are in place, False when
	// RBAC is not managed (Unmanaged), the mode is invalid, or a role is in
	// conflict.
	TypeRBACManaged = "RBACManaged"
)

// Condition reasons. Reasons are CamelCase words a user can search the
// troubleshooting guide (docs/) for.
const (
	// ReasonLegacy (RBACManaged=True): roles generated and aggregated to the
	// built-in admin, edit and view ClusterRoles.
	ReasonLegacy = string(RBACModeLegacy)
	// ReasonFineGrained (RBACManaged=True): roles generated, granted only
	// through RBACPolicy objects.
	ReasonFineGrained = string(RBACModeFineGrained)
	// ReasonUnmanaged (RBACManaged=False): oria manages no RBAC for the
	// extension; the admin must grant access by hand.
	ReasonUnmanaged = string(RBACModeUnmanaged)
	// ReasonInvalidMode (RBACManaged=False): the rbac-mode annotation has a
	// value that is not a mode; nothing was changed.
	ReasonInvalidMode = "InvalidMode"

	// ReasonBound (Ready=True): every binding the object asks for exists.
	ReasonBound = "Bound"
	// ReasonValid (Ready=True on a ScopeTemplate): the template is valid and
	// its inline ClusterRoles exist while instances use it.
	ReasonValid = "Valid"
	// ReasonProgressing (Ready=False): oria is still creating or removing
	// objects, or waits for something it depends on to converge (on an
	// RBACPolicy: a generated ClusterRole that does not exist yet, or that
	// someone changed and the extension controller is restoring, is not
	// bound until it is as oria generates it).
	ReasonProgressing = "Progressing"
	// ReasonConflict: an object with the name oria would use exists and was
	// not created by oria (or belongs to another owner); it is left alone and
	// named in the message. On an RBACPolicy it also names a ClusterRole
	// under a generated name that is neither oria's (exactly as generated)
	// nor a bundle role of the extension: the policy never binds it, and
	// binds the others.
	ReasonConflict = "Conflict"
	// ReasonBundleRoleTooBroad (RBACManaged=False): a ClusterRole the
	// extension's bundle provides under one of the generated names grants
	// more than the extension's own APIs (another group or resource, a
	// wildcard, a non-resource URL, CustomResourceDefinitions beyond the
	// extension's own). oria grants it nowhere: no aggregation label in
	// Legacy mode (one oria added earlier is removed), no binding from
	// RBACPolicy objects. The message names the role and its first
	// offending rules; the extension's other ClusterRoles are in place.
	ReasonBundleRoleTooBroad = "BundleRoleTooBroad"
	// ReasonInvalidSpec: the spec is rejected by a check the API schema
	// cannot express; the message says which field and why.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonInvalidSelector: namespaceSelector cannot be parsed.
	ReasonInvalidSelector = "InvalidSelector"
	// ReasonInvalidSubject: a subject is unusable (unknown kind, empty name,
	// ServiceAccount without namespace where one is required).
	ReasonInvalidSubject = "InvalidSubject"
	// ReasonTemplateNotFound (ScopeInstance): the named ScopeTemplate does not
	// exist.
	ReasonTemplateNotFound = "TemplateNotFound"
	// ReasonTemplateInvalid (ScopeInstance): the named ScopeTemplate exists but
	// is not valid.
	ReasonTemplateInvalid = "TemplateInvalid"
	// ReasonNamespaceNotFound (ScopeInstance, RBACPolicy): a listed namespace
	// does not exist (yet); the other namespaces are bound, and the missing
	// one is bound as soon as it appears.
	ReasonNamespaceNotFound = "NamespaceNotFound"
	// ReasonNamespaceRecreated (ScopeInstance, RBACPolicy): a listed
	// namespace was deleted and created again since the spec was written;
	// the grant checked for the old namespace is not carried over to the
	// new one until the spec is written again other than its window
	// (status.namespaceUIDs, status.pinnedFor).
	ReasonNamespaceRecreated = "NamespaceRecreated"
	// ReasonWaitingForRules (ScopeInstance): an inline ClusterRole does not
	// hold its template's current rules yet (held back for a ServiceAccount
	// ceiling, or about to be written): no new binding of it is made until
	// it does, so nothing is ever bound against rules the guard did not
	// check for this instance; existing bindings stay.
	ReasonWaitingForRules = "WaitingForRules"
	// ReasonPublicationNamespaceNotFound (ScopeInstance): the namespace of
	// spec.publication.configMap does not exist (yet); the bindings are in
	// place, and the list is published as soon as the namespace appears.
	ReasonPublicationNamespaceNotFound = "PublicationNamespaceNotFound"
	// ReasonExtensionNotFound (RBACPolicy): no ClusterExtension has the name.
	ReasonExtensionNotFound = "ExtensionNotFound"
	// ReasonOLMNotInstalled (RBACPolicy): the API server does not serve OLM
	// v1's ClusterExtension API (its CRD is not installed, or not
	// established), so no extension can exist; access is granted once OLM v1
	// and the extension are installed, without restarting oria.
	ReasonOLMNotInstalled = "OLMNotInstalled"
	// ReasonExtensionUnmanaged (RBACPolicy): the extension is not in Legacy or
	// FineGrained mode, so its ClusterRoles do not exist.
	ReasonExtensionUnmanaged = "ExtensionUnmanaged"
	// ReasonAPINotFound (RBACPolicy): the extension provides none of the APIs
	// the policy names (or no API at all).
	ReasonAPINotFound = "APINotFound"
	// ReasonClusterRoleNotFound (Ready=False on a ScopeTemplate, and on the
	// ScopeInstances and RBACPolicies that bind it): a ClusterRole the
	// template references by name does not exist. Its bindings are created
	// all the same (as Kubernetes allows) and grant nothing until it does.
	ReasonClusterRoleNotFound = "ClusterRoleNotFound"
	// ReasonClusterScopedAPI (Ready=False on an RBACPolicy): the policy
	// grants in namespaces (spec.namespaces or spec.namespaceSelector) but
	// covers a cluster-scoped API, which a RoleBinding cannot reach; the
	// message names it and says how to grant it (a cluster-wide policy).
	ReasonClusterScopedAPI = "ClusterScopedAPI"
	// ReasonForbidden (Ready=False on a ScopeInstance with a serviceAccount,
	// and on the RBACPolicy behind it): the API server refused some
	// bindings because the ServiceAccount may not grant them; the message
	// carries the API server's answer (which permissions, which
	// ServiceAccount, which namespace). The other bindings are in place;
	// oria tries again periodically.
	ReasonForbidden = "Forbidden"
	// ReasonServiceAccountNotFound (Ready=False): the ServiceAccount named in
	// spec.serviceAccount does not exist; nothing new is written until it
	// does, existing bindings are kept.
	ReasonServiceAccountNotFound = "ServiceAccountNotFound"
	// ReasonPending (Ready=False on a ScopeInstance or RBACPolicy with
	// spec.notBefore): the grant has not started; it has no bindings until
	// notBefore. Not an error.
	ReasonPending = "Pending"
	// ReasonExpired (Ready=False on a ScopeInstance or RBACPolicy with
	// spec.expiresAt): the grant ended at expiresAt and its bindings are
	// deleted. Terminal and not an error: the object stays as a record
	// until it is deleted, or its expiresAt moved later (a new grant).
	ReasonExpired = "Expired"
	// ReasonReconcileError (status Unknown): an unexpected error, such as the
	// API server refusing a write; oria retries with backoff.
	ReasonReconcileError = "ReconcileError"

	// ReasonEligible (Ready=False on an RBACPolicy with eligibility): the
	// policy binds nothing by itself; its subjects activate it with
	// AccessRequests.
	ReasonEligible = "Eligible"

	// TypeActive (on an AccessRequest) is True while the request's grant is
	// in force; its reason is the request's state (the Reason* below, or
	// ReasonBound while the grant is bound).
	TypeActive = "Active"
	// ReasonRequested (Active=False): waiting for approval.
	ReasonRequested = "Requested"
	// ReasonApproved (Active=True): approved, the grant is being bound or
	// is in force.
	ReasonApproved = "Approved"
	// ReasonDenied (Active=False): an approver denied it.
	ReasonDenied = "Denied"
	// ReasonCancelled (Active=False): ended before approval, by the
	// requester or an admin, or its policy went away.
	ReasonCancelled = "Cancelled"
	// ReasonRequestExpired (Active=False): never approved in time.
	ReasonRequestExpired = "RequestExpired"
	// ReasonEnded (Active=False): the activation ended (its time was up,
	// it was ended early, or its policy no longer allows it).
	ReasonEnded = "Ended"
)
