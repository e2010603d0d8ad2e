package extension

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/genroles"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/ownership"
)

// aggregationLabel is the Kubernetes aggregation label each role carries in
// Legacy mode: the viewer's CRD access aggregates into view with the viewer's
// resource access.
var aggregationLabel = map[names.RoleKind]string{
	names.RoleAdmin:       oriav1alpha1.LabelAggregateToAdmin,
	names.RoleEdit:        oriav1alpha1.LabelAggregateToEdit,
	names.RoleView:        oriav1alpha1.LabelAggregateToView,
	names.RoleViewCRDView: oriav1alpha1.LabelAggregateToView,
}

// AggregationLabel returns the aggregation label key of a role kind.
func AggregationLabel(k names.RoleKind) string { return aggregationLabel[k] }

// exclusiveLabels are the label keys oria decides on for a generated
// ClusterRole: one of them that oria does not want on a role (an aggregation
// label on a FineGrained role, which would widen access) is removed, even if
// someone else set it. Any other label is someone else's and left alone.
var exclusiveLabels = []string{
	oriav1alpha1.LabelAggregateToAdmin,
	oriav1alpha1.LabelAggregateToEdit,
	oriav1alpha1.LabelAggregateToView,
}

// Extension identifies the ClusterExtension the roles are generated for.
type Extension struct {
	Name string
	UID  types.UID
	// Namespace is its spec.namespace, where operator-controller keeps its
	// Helm release.
	Namespace string
}

// managedMode reports whether oria generates roles in mode.
func managedMode(mode oriav1alpha1.RBACMode) bool {
	return mode == oriav1alpha1.RBACModeLegacy || mode == oriav1alpha1.RBACModeFineGrained
}

// DesiredRoles returns the ClusterRoles oria generates for an extension that
// provides the CRDs named crds, in the given mode, sorted by name, except
// those whose names the bundle provides (bundle: role names the extension's
// bundle installed; oria uses those instead). Unmanaged (or any mode that is
// not Legacy or FineGrained) generates nothing. Every role is the full
// object oria intends (labels, annotation, owner reference, rules).
func DesiredRoles(ext Extension, crds []string, mode oriav1alpha1.RBACMode, bundle map[string]bool) []*rbacv1.ClusterRole {
	if !managedMode(mode) {
		return nil
	}
	crds = slices.Compact(slices.Sorted(slices.Values(crds)))
	out := make([]*rbacv1.ClusterRole, 0, len(crds)*len(names.RoleKinds))
	for _, crd := range crds {
		for _, k := range names.RoleKinds {
			name := names.ExtensionRole(crd, k)
			if bundle[name] {
				continue
			}
			labels := ownership.ExtensionRoleLabels(ext.Name, k)
			if mode == oriav1alpha1.RBACModeLegacy {
				labels[aggregationLabel[k]] = "true"
			}
			out = append(out, &rbacv1.ClusterRole{
				TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
				ObjectMeta: metav1.ObjectMeta{
					Name:            name,
					Labels:          labels,
					Annotations:     ownership.ExtensionRoleAnnotations(ext.Name, ext.Namespace, crd),
					OwnerReferences: []metav1.OwnerReference{ownership.ExtensionRef(ext.Name, ext.UID)},
				},
				Rules: genroles.Rules(crd, k),
			})
		}
	}
	slices.SortFunc(out, func(a, b *rbacv1.ClusterRole) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// BundleRole is a bundle-provided ClusterRole with one of the generated
// names.
type BundleRole struct {
	Name string
	Kind names.RoleKind
	// Labels are its labels; OwnedLabels the keys oria's field manager owns
	// on it (from managedFields).
	Labels      map[string]string
	OwnedLabels []string
	// TooBroad, when not empty, says how the role's rules reach beyond the
	// extension's APIs (bundlerole.TooBroad): oria grants it nowhere. Only
	// judged in Legacy and FineGrained mode.
	TooBroad string
	// Object is the role's metadata as read (a role oria generated before
	// the bundle adopted it still carries oria's labels and managed
	// fields: see handOverPatch).
	Object *metav1.PartialObjectMetadata
}

// BundleRoleApply returns the apply configuration oria sends for a
// bundle-provided ClusterRole, or nil when the role already is as oria
// wants it: in Legacy mode oria owns exactly the one aggregation label of
// the role's kind, with value "true", unless the role reaches beyond the
// extension (b.TooBroad); in any other mode, or for such a role, it owns no
// label.
// Applying only the name and that label with oria's field owner touches
// nothing the bundle owns, and applying it without the label releases
// exactly the label oria added earlier.
func BundleRoleApply(b BundleRole, mode oriav1alpha1.RBACMode) *rbacv1ac.ClusterRoleApplyConfiguration {
	key := keptLabel(b, mode)
	if key != "" {
		if b.Labels[key] == "true" && slices.Equal(b.OwnedLabels, []string{key}) {
			return nil
		}
		return rbacv1ac.ClusterRole(b.Name).WithLabels(map[string]string{key: "true"})
	}
	if len(b.OwnedLabels) == 0 {
		return nil
	}
	return rbacv1ac.ClusterRole(b.Name)
}

// keptLabel is the label oria owns on the bundle role b in mode: the
// aggregation label of its kind in Legacy mode, unless the role reaches
// beyond the extension; "" (none) otherwise.
func keptLabel(b BundleRole, mode oriav1alpha1.RBACMode) string {
	if mode == oriav1alpha1.RBACModeLegacy && b.TooBroad == "" {
		return aggregationLabel[b.Kind]
	}
	return ""
}

// BundleRoles returns the bundle-provided roles among objs (the extension's
// bundle ClusterRoles) that hold a generated name of one of crds, by name.
func BundleRoles(objs []metav1.PartialObjectMetadata, crds []string) map[string]BundleRole {
	byName := names.ExtensionRoleKinds(crds)
	out := map[string]BundleRole{}
	for i := range objs {
		o := &objs[i]
		k, ok := byName[o.Name]
		if !ok || !o.DeletionTimestamp.IsZero() {
			continue
		}
		out[o.Name] = BundleRole{Name: o.Name, Kind: k, Labels: maps.Clone(o.Labels), OwnedLabels: appliedLabels(o), Object: o}
	}
	return out
}

// appliedLabels returns, sorted, the label keys oria's field manager owns on
// obj through server-side apply (from managedFields).
func appliedLabels(obj metav1.Object) []string {
	var out []string
	for _, e := range obj.GetManagedFields() {
		if e.Manager != oriav1alpha1.FieldOwner || e.Operation != metav1.ManagedFieldsOperationApply ||
			e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Metadata struct {
				Labels map[string]json.RawMessage `json:"f:labels"`
			} `json:"f:metadata"`
		}
		if err := json.Unmarshal(e.FieldsV1.Raw, &fields); err != nil {
			continue
		}
		for k := range fields.Metadata.Labels {
			if key, ok := strings.CutPrefix(k, "f:"); ok {
				out = append(out, key)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
