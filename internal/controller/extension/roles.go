package extension

import (
	"maps"
	"slices"
	"strings"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/utils/ptr"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
)

// RoleKind is one of the four ClusterRoles generated for every API of an
// extension. Its value is the suffix of the role name and the value of the
// oria.operatorframework.io/role label.
type RoleKind string

const (
	// RoleAdmin grants every verb on the API's resource.
	RoleAdmin RoleKind = "admin"
	// RoleEdit grants create, update, patch and delete.
	RoleEdit RoleKind = "edit"
	// RoleView grants get, list and watch.
	RoleView RoleKind = "view"
	// RoleViewCRD grants get on the API's CustomResourceDefinition, so that
	// viewers can discover the schema (kubectl explain) as in OLM v0.
	RoleViewCRD RoleKind = "view-crdview"
)

// RoleKinds lists the generated roles of one API in name order.
var RoleKinds = []RoleKind{RoleAdmin, RoleEdit, RoleView, RoleViewCRD}

// aggregationLabel is the Kubernetes aggregation label each role carries in
// Legacy mode: the viewer's CRD access aggregates into view with the viewer's
// resource access.
var aggregationLabel = map[RoleKind]string{
	RoleAdmin:   oriav1alpha1.LabelAggregateToAdmin,
	RoleEdit:    oriav1alpha1.LabelAggregateToEdit,
	RoleView:    oriav1alpha1.LabelAggregateToView,
	RoleViewCRD: oriav1alpha1.LabelAggregateToView,
}

// AggregationLabel returns the aggregation label key of a role kind.
func AggregationLabel(k RoleKind) string { return aggregationLabel[k] }

// knownLabels are the label keys oria may set on a generated ClusterRole. A
// key in this set that oria does not want on a role (an aggregation label
// after leaving Legacy mode, say) must be absent for the role to be in its
// desired state; any other label belongs to someone else and is left alone.
var knownLabels = []string{
	oriav1alpha1.LabelManagedBy,
	oriav1alpha1.LabelExtension,
	oriav1alpha1.LabelRole,
	oriav1alpha1.LabelAggregateToAdmin,
	oriav1alpha1.LabelAggregateToEdit,
	oriav1alpha1.LabelAggregateToView,
}

// Extension identifies the ClusterExtension the roles are generated for.
type Extension struct {
	Name string
	UID  types.UID
}

// RoleName returns the name of the role of kind k for the CRD named crd:
// "<crd>-<kind>", shortened deterministically when it would exceed the
// 253-character name limit.
func RoleName(crd string, k RoleKind) string {
	return names.Shorten(crd+"-"+string(k), names.MaxObjectName)
}

// SplitCRDName returns the plural resource and the API group of a CRD from
// its name. The API server only accepts CRDs named "<plural>.<group>", so the
// name alone is enough and the (large) spec need not be read; a name without
// a dot cannot be a valid CRD and is treated as a resource of the core group
// rather than rejected, so a malformed object cannot stop the reconcile.
func SplitCRDName(crd string) (plural, group string) {
	plural, group, _ = strings.Cut(crd, ".")
	return plural, group
}

// rules returns the policy rules of the role of kind k for the CRD named crd.
func rules(crd string, k RoleKind) []rbacv1.PolicyRule {
	plural, group := SplitCRDName(crd)
	rule := func(verbs ...string) []rbacv1.PolicyRule {
		return []rbacv1.PolicyRule{{APIGroups: []string{group}, Resources: []string{plural}, Verbs: verbs}}
	}
	switch k {
	case RoleAdmin:
		return rule(rbacv1.VerbAll)
	case RoleEdit:
		return rule("create", "update", "patch", "delete")
	case RoleView:
		return rule("get", "list", "watch")
	case RoleViewCRD:
		return []rbacv1.PolicyRule{{
			APIGroups:     []string{apiextensionsv1.GroupName},
			Resources:     []string{"customresourcedefinitions"},
			ResourceNames: []string{crd},
			Verbs:         []string{"get"},
		}}
	}
	return nil
}

// OwnerReference returns the controller reference generated roles carry to
// their ClusterExtension, so the garbage collector removes them with the
// extension even when oria is not running.
func OwnerReference(ext Extension) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(ocv1.GroupVersion.String()).
		WithKind(ocv1.ClusterExtensionKind).
		WithName(ext.Name).
		WithUID(ext.UID).
		WithController(true)
}

// DesiredRoles returns the ClusterRoles oria generates for an extension that
// provides the CRDs named crds, in the given mode, sorted by name. Unmanaged
// (or any mode that is not Legacy or FineGrained) generates nothing. Every
// role is the full object oria intends (labels, annotation, owner reference,
// rules), suitable for server-side apply.
func DesiredRoles(ext Extension, crds []string, mode oriav1alpha1.RBACMode) []*rbacv1ac.ClusterRoleApplyConfiguration {
	if mode != oriav1alpha1.RBACModeLegacy && mode != oriav1alpha1.RBACModeFineGrained {
		return nil
	}
	crds = slices.Clone(crds)
	slices.Sort(crds)
	crds = slices.Compact(crds)
	out := make([]*rbacv1ac.ClusterRoleApplyConfiguration, 0, len(crds)*len(RoleKinds))
	for _, crd := range crds {
		for _, k := range RoleKinds {
			labels := map[string]string{
				oriav1alpha1.LabelManagedBy: oriav1alpha1.ManagedByValue,
				oriav1alpha1.LabelExtension: names.LabelValue(ext.Name),
				oriav1alpha1.LabelRole:      string(k),
			}
			if mode == oriav1alpha1.RBACModeLegacy {
				labels[aggregationLabel[k]] = "true"
			}
			ac := rbacv1ac.ClusterRole(RoleName(crd, k)).
				WithLabels(labels).
				WithAnnotations(map[string]string{oriav1alpha1.AnnotationCRD: crd}).
				WithOwnerReferences(OwnerReference(ext))
			for _, r := range rules(crd, k) {
				ac.WithRules(policyRuleAC(r))
			}
			out = append(out, ac)
		}
	}
	slices.SortFunc(out, func(a, b *rbacv1ac.ClusterRoleApplyConfiguration) int {
		return strings.Compare(ptr.Deref(a.Name, ""), ptr.Deref(b.Name, ""))
	})
	return out
}

// BundleRoleApply returns the apply configuration oria sends for a
// bundle-provided ClusterRole: only the name and, in Legacy mode, the one
// aggregation label of its kind. Applying it with oria's field owner touches
// nothing the bundle owns, and applying it without the label (any other
// mode) releases exactly the label oria added earlier.
func BundleRoleApply(name string, k RoleKind, mode oriav1alpha1.RBACMode) *rbacv1ac.ClusterRoleApplyConfiguration {
	ac := rbacv1ac.ClusterRole(name)
	if mode == oriav1alpha1.RBACModeLegacy {
		ac.WithLabels(map[string]string{aggregationLabel[k]: "true"})
	}
	return ac
}

func policyRuleAC(r rbacv1.PolicyRule) *rbacv1ac.PolicyRuleApplyConfiguration {
	ac := rbacv1ac.PolicyRule().
		WithAPIGroups(r.APIGroups...).
		WithResources(r.Resources...).
		WithVerbs(r.Verbs...)
	if len(r.ResourceNames) > 0 {
		ac.WithResourceNames(r.ResourceNames...)
	}
	return ac
}

// clusterRoleFrom returns the ClusterRole ac describes, for creating it.
func clusterRoleFrom(ac *rbacv1ac.ClusterRoleApplyConfiguration) *rbacv1.ClusterRole {
	cr := &rbacv1.ClusterRole{
		TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        ptr.Deref(ac.Name, ""),
			Labels:      maps.Clone(ac.Labels),
			Annotations: maps.Clone(ac.Annotations),
		},
		Rules: policyRules(ac.Rules),
	}
	for _, o := range ac.OwnerReferences {
		cr.OwnerReferences = append(cr.OwnerReferences, metav1.OwnerReference{
			APIVersion:         ptr.Deref(o.APIVersion, ""),
			Kind:               ptr.Deref(o.Kind, ""),
			Name:               ptr.Deref(o.Name, ""),
			UID:                ptr.Deref(o.UID, ""),
			Controller:         o.Controller,
			BlockOwnerDeletion: o.BlockOwnerDeletion,
		})
	}
	return cr
}

// policyRules converts apply-configuration rules back to API rules, for
// comparing the desired role with the cached one.
func policyRules(acs []rbacv1ac.PolicyRuleApplyConfiguration) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, 0, len(acs))
	for _, r := range acs {
		out = append(out, rbacv1.PolicyRule{
			APIGroups:       r.APIGroups,
			Resources:       r.Resources,
			ResourceNames:   r.ResourceNames,
			Verbs:           r.Verbs,
			NonResourceURLs: r.NonResourceURLs,
		})
	}
	return out
}
