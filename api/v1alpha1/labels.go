package v1alpha1

import "strings"

// Label and annotation keys used by oria. They live in one place so that the
// controllers, the cache filters and the documentation cannot drift apart.
const (
	// AnnotationRBACMode selects how oria manages RBAC for the APIs a
	// ClusterExtension provides. Values are the RBACMode constants; when the
	// annotation is absent the controller's --default-rbac-mode applies.
	AnnotationRBACMode = "oria.operatorframework.io/rbac-mode"

	// LabelManaged ("true") marks every object oria creates. oria's caches
	// of RBAC objects are filtered on it, so an object without it is
	// invisible to oria's informers, and ownership is decided with it (never
	// with LabelManagedBy alone).
	LabelManaged = "oria.operatorframework.io/managed"
	// ManagedValue is the value of LabelManaged on oria's objects.
	ManagedValue = "true"

	// LabelManagedBy is the conventional label naming the tool that manages
	// an object. oria sets it to ManagedByValue on what it creates, except
	// on the ClusterRoles it generates for an extension's APIs: those say
	// ManagedByHelm and carry Helm's release annotations for the
	// extension's release (internal/olm.AdoptionMetadata), so that when a
	// later bundle ships a role under the same name, operator-controller's
	// Helm adopts the role instead of refusing the install or upgrade. The
	// label says nothing to oria about ownership: see LabelManaged.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy on oria's objects.
	ManagedByValue = "oria"
	// ManagedByHelm is the value of LabelManagedBy Helm requires on an
	// existing object before a release may adopt it.
	ManagedByHelm = "Helm"
	// AnnotationHelmReleaseName and AnnotationHelmReleaseNamespace name the
	// Helm release an object belongs to (Helm's pkg/action/validate.go): a
	// release adopts an existing object only when both name it and
	// LabelManagedBy is ManagedByHelm.
	AnnotationHelmReleaseName = "meta.helm.sh/release-name"
	// AnnotationHelmReleaseNamespace: see AnnotationHelmReleaseName.
	AnnotationHelmReleaseNamespace = "meta.helm.sh/release-namespace"

	// LabelVersion records the oria release an installed object belongs to:
	// `make build-installer` stamps VERSION on every object of the install
	// (its CRDs, its Deployment and the Deployment's pods), and `kubectl oria
	// check` and `kubectl oria version` read it back.
	LabelVersion = "app.kubernetes.io/version"

	// LabelExtension names the ClusterExtension a generated ClusterRole
	// belongs to (see LabelValue for names longer than a label value allows).
	LabelExtension = "oria.operatorframework.io/extension"
	// LabelScopeTemplate names the ScopeTemplate an object was generated for.
	LabelScopeTemplate = "oria.operatorframework.io/scope-template"
	// LabelScopeInstance names the ScopeInstance a binding was generated for.
	LabelScopeInstance = "oria.operatorframework.io/scope-instance"
	// LabelRBACPolicy names the RBACPolicy a ScopeTemplate or ScopeInstance
	// was compiled from.
	LabelRBACPolicy = "oria.operatorframework.io/rbac-policy"
	// LabelRole records which generated role an object is: admin, edit, view
	// or view-crdview.
	LabelRole = "oria.operatorframework.io/role"

	// AnnotationCRD records, on a generated ClusterRole, the full name of the
	// CustomResourceDefinition it grants access to (a CRD name can be longer
	// than a label value may be).
	AnnotationCRD = "oria.operatorframework.io/crd"

	// LabelOLMOwnerKind and LabelOLMOwnerName are set by operator-controller on
	// everything it installs for a ClusterExtension, CRDs and bundle-provided
	// ClusterRoles included. oria reads them; it never writes them.
	LabelOLMOwnerKind = "olm.operatorframework.io/owner-kind"
	// LabelOLMOwnerName: see LabelOLMOwnerKind.
	LabelOLMOwnerName = "olm.operatorframework.io/owner-name"
	// OLMOwnerKindClusterExtension is the LabelOLMOwnerKind value for
	// objects installed for a ClusterExtension.
	OLMOwnerKindClusterExtension = "ClusterExtension"

	// LabelAggregateToAdmin, LabelAggregateToEdit and LabelAggregateToView are
	// the Kubernetes ClusterRole aggregation labels used in Legacy mode.
	LabelAggregateToAdmin = "rbac.authorization.k8s.io/aggregate-to-admin"
	// LabelAggregateToEdit: see LabelAggregateToAdmin.
	LabelAggregateToEdit = "rbac.authorization.k8s.io/aggregate-to-edit"
	// LabelAggregateToView: see LabelAggregateToAdmin.
	LabelAggregateToView = "rbac.authorization.k8s.io/aggregate-to-view"

	// AnnotationRestartedFor is the pod-template annotation oria sets on the
	// workloads a ScopeInstance's publication restarts: the hash of the
	// published namespace list (status.publication.hash). Setting it is a
	// rollout, as kubectl rollout restart's restartedAt; the same list never
	// restarts a workload twice.
	AnnotationRestartedFor = "oria.operatorframework.io/restarted-for"
	// LabelPublished ("true") marks a ConfigMap a ScopeInstance publishes
	// into; oria caches only the ConfigMaps that carry it. It is not
	// LabelManaged: a ConfigMap oria shares with another tool is not oria's,
	// and must not make the two fight over a label.
	LabelPublished = "oria.operatorframework.io/published"
	// AnnotationPublishedPrefix prefixes the annotation oria sets on a
	// ConfigMap it publishes into, one per ScopeInstance:
	// "<prefix><LabelValue(instance)>" = the key it writes.
	AnnotationPublishedPrefix = "publication.oria.operatorframework.io/"
	// PublicationFieldOwnerPrefix prefixes the field manager of one
	// ScopeInstance's publication writes (ConfigMap key, restart
	// annotation): one manager per instance, so that instances sharing a
	// ConfigMap never take each other's keys.
	PublicationFieldOwnerPrefix = "oria-publication/"

	// AnnotationCeilingRules is set on every binding of a ScopeInstance
	// with a ceiling (spec.serviceAccount): the hash of the rules of
	// the bound ClusterRole that the ServiceAccount was last asked about
	// (binding.CeilingHash; for a template's inline role, the rules of the
	// template's spec). When what the role grants changes, the hash no
	// longer matches: the ServiceAccount decides again, and the ScopeTemplate
	// controller holds back new inline rules until it has.
	AnnotationCeilingRules = "oria.operatorframework.io/ceiling-rules"

	// AnnotationReason records, on an RBACPolicy that `kubectl oria grant`
	// created, why the access was granted (its --reason): the record an
	// expired grant keeps of who was granted what, until when, and why.
	// oria reads nothing from it.
	AnnotationReason = "oria.operatorframework.io/reason"

	// The record of a grant and of its revocation, on an RBACPolicy or a
	// ScopeInstance: who (the user name the API server authenticated),
	// when (RFC 3339) and why. `kubectl oria grant` writes the grant's at
	// creation (AnnotationGrantedBy, AnnotationGrantedAt, with
	// AnnotationReason), `kubectl oria revoke` the revocation's with its
	// patch (AnnotationRevokedBy, AnnotationRevokedAt,
	// AnnotationRevokeReason). The escalation guard keeps them true, for
	// every requester (package record): a "-by" must be the requester, an
	// "-at" the guard's clock (within record.MaxSkew), the grant's record
	// is written at creation and never changed, a revocation's is written
	// whole by its author and never removed. oria decides nothing from
	// them; it names them in its events.
	AnnotationGrantedBy    = "oria.operatorframework.io/granted-by"
	AnnotationGrantedAt    = "oria.operatorframework.io/granted-at"
	AnnotationRevokedBy    = "oria.operatorframework.io/revoked-by"
	AnnotationRevokedAt    = "oria.operatorframework.io/revoked-at"
	AnnotationRevokeReason = "oria.operatorframework.io/revoke-reason"

	// The decisions on an AccessRequest, each written once, whole, by its
	// author, and never changed or removed (the guard checks who may write
	// each, package eligibility): its approval, its denial, and its end (a
	// cancellation before approval, an early end after). A "-by" must be
	// the requester as the API server authenticated them, an "-at" the
	// guard's clock (within record.MaxSkew).
	AnnotationApprovedBy    = "oria.operatorframework.io/approved-by"
	AnnotationApprovedAt    = "oria.operatorframework.io/approved-at"
	AnnotationApproveReason = "oria.operatorframework.io/approve-reason"
	AnnotationDeniedBy      = "oria.operatorframework.io/denied-by"
	AnnotationDeniedAt      = "oria.operatorframework.io/denied-at"
	AnnotationDenyReason    = "oria.operatorframework.io/deny-reason"
	AnnotationEndedBy       = "oria.operatorframework.io/ended-by"
	AnnotationEndedAt       = "oria.operatorframework.io/ended-at"
	AnnotationEndReason     = "oria.operatorframework.io/end-reason"

	// LabelAccessRequest names the AccessRequest a ScopeTemplate or
	// ScopeInstance was compiled for (its activation).
	LabelAccessRequest = "oria.operatorframework.io/access-request"

	// AnnotationPlannedTemplate, on a ScopeInstance sent as a dry run only,
	// holds the ScopeTemplate (JSON) that the same input creates before it:
	// `kubectl oria plan -f` judges a file as `kubectl apply -f` would, where
	// the template exists by the time the instance is written. The guard
	// reads it on a dry run whose template does not exist, and nowhere
	// else; nothing oria decides ever reads it.
	AnnotationPlannedTemplate = "oria.operatorframework.io/planned-template"

	// FieldOwner is the server-side apply field manager oria uses for every
	// write, status included, except publications (see
	// PublicationFieldOwnerPrefix).
	FieldOwner = "oria"
)

// RBACMode is the value of the AnnotationRBACMode annotation.
type RBACMode string

const (
	// RBACModeLegacy generates ClusterRoles for every API of an extension and
	// aggregates them into the built-in admin, edit and view ClusterRoles, as
	// OLM v0 did.
	RBACModeLegacy RBACMode = "Legacy"
	// RBACModeFineGrained generates the same ClusterRoles without aggregation
	// labels; RBACPolicy objects bind them to chosen subjects.
	RBACModeFineGrained RBACMode = "FineGrained"
	// RBACModeUnmanaged leaves RBAC for the extension's APIs to the admin;
	// oria generates nothing and removes what it generated earlier.
	RBACModeUnmanaged RBACMode = "Unmanaged"
)

// RBACModes lists the valid RBACMode values in documentation order.
var RBACModes = []RBACMode{RBACModeLegacy, RBACModeFineGrained, RBACModeUnmanaged}

// RBACModeNames lists the valid modes for messages: "Legacy, FineGrained,
// Unmanaged".
func RBACModeNames() string {
	s := make([]string, len(RBACModes))
	for i, m := range RBACModes {
		s[i] = string(m)
	}
	return strings.Join(s, ", ")
}

// ParseRBACMode returns the RBACMode spelled s and whether s is a valid mode.
// Matching is exact: Kubernetes enum values are case-sensitive.
func ParseRBACMode(s string) (RBACMode, bool) {
	for _, m := range RBACModes {
		if string(m) == s {
			return m, true
		}
	}
	return "", false
}

// EffectiveRBACMode returns the RBAC mode an object with these annotations
// is in: the AnnotationRBACMode value when present, otherwise defaultMode.
// valid is false (and mode empty) when the annotation holds an unknown value.
func EffectiveRBACMode(annotations map[string]string, defaultMode RBACMode) (mode RBACMode, valid bool) {
	v, ok := annotations[AnnotationRBACMode]
	if !ok {
		return defaultMode, true
	}
	return ParseRBACMode(v)
}

// AnnotationGateRoles is set on a gate, the ClusterRole a time-bound grant
// over many namespaces binds in place of its template's roles: the roles,
// comma-separated, whose rules it holds while the window is open.
const AnnotationGateRoles = "oria.operatorframework.io/gate-roles"
