package extension

import (
	"encoding/json"
	"slices"
	"strings"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/utils/ptr"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
)

// upToDate reports whether cur already is in the state desired describes,
// so that applying desired would change nothing. It compares only what oria
// owns: every desired label present with its value, none of oria's label
// keys present that desired leaves out (an aggregation label after leaving
// Legacy mode), the annotation, the controller reference and the rules.
// Anything else on the object (labels or owner references others added) is
// not oria's business.
func upToDate(desired *rbacv1ac.ClusterRoleApplyConfiguration, cur *rbacv1.ClusterRole) bool {
	return len(undesiredLabels(desired, cur)) == 0 &&
		hasAll(cur.Labels, desired.Labels) &&
		hasAll(cur.Annotations, desired.Annotations) &&
		hasOwnerReferences(cur.OwnerReferences, desired.OwnerReferences) &&
		equality.Semantic.DeepEqual(policyRules(desired.Rules), cur.Rules)
}

// undesiredLabels returns, sorted, the keys of oria's labels that cur
// carries and desired does not want. Server-side apply removes such a label
// only when oria alone owns it; one that someone else set (kubectl label) is
// removed by the caller explicitly.
func undesiredLabels(desired *rbacv1ac.ClusterRoleApplyConfiguration, cur *rbacv1.ClusterRole) []string {
	var out []string
	for _, k := range knownLabels {
		if _, want := desired.Labels[k]; want {
			continue
		}
		if _, has := cur.Labels[k]; has {
			out = append(out, k)
		}
	}
	return out
}

func hasAll(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func hasOwnerReferences(have []metav1.OwnerReference, want []metav1ac.OwnerReferenceApplyConfiguration) bool {
	for _, w := range want {
		if !slices.ContainsFunc(have, func(h metav1.OwnerReference) bool {
			return h.APIVersion == ptr.Deref(w.APIVersion, "") &&
				h.Kind == ptr.Deref(w.Kind, "") &&
				h.Name == ptr.Deref(w.Name, "") &&
				h.UID == ptr.Deref(w.UID, "") &&
				ptr.Deref(h.Controller, false) == ptr.Deref(w.Controller, false) &&
				ptr.Deref(h.BlockOwnerDeletion, false) == ptr.Deref(w.BlockOwnerDeletion, false)
		}) {
			return false
		}
	}
	return true
}

// controllerIsExtension reports whether ref points at a ClusterExtension
// named name (any UID: an extension deleted and re-created under the same
// name is the same extension to oria, as it is to operator-controller's
// owner labels).
func controllerIsExtension(ref *metav1.OwnerReference, name string) bool {
	if ref == nil || ref.Kind != ocv1.ClusterExtensionKind || ref.Name != name {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == ocv1.GroupVersion.Group
}

// isOriaRoleOf reports whether cr is a ClusterRole oria generated for the
// extension named name: it carries oria's labels for that extension, and its
// controller reference, if it still has one, is that extension (a role whose
// controller is something else is not oria's to change, labels or not).
func isOriaRoleOf(cr *rbacv1.ClusterRole, name string) bool {
	if cr.Labels[oriav1alpha1.LabelManagedBy] != oriav1alpha1.ManagedByValue ||
		cr.Labels[oriav1alpha1.LabelExtension] != names.LabelValue(name) {
		return false
	}
	if ref := metav1.GetControllerOfNoCopy(cr); ref != nil {
		return controllerIsExtension(ref, name)
	}
	_, ok := cr.Annotations[oriav1alpha1.AnnotationCRD]
	return ok
}

// isControlledBy reports whether cr's controller reference is exactly this
// ClusterExtension (name and UID). It identifies oria's roles from which
// someone removed oria's labels: they dropped out of oria's cache but are
// still oria's, and are re-adopted by applying them again.
func isControlledBy(cr *rbacv1.ClusterRole, ext Extension) bool {
	ref := metav1.GetControllerOfNoCopy(cr)
	return controllerIsExtension(ref, ext.Name) && ref.UID == ext.UID
}

// isBundleRoleOf reports whether cr was installed by operator-controller for
// the extension named name (its owner labels say so) and is not oria's.
func isBundleRoleOf(cr *rbacv1.ClusterRole, name string) bool {
	return cr.Labels[oriav1alpha1.LabelManagedBy] != oriav1alpha1.ManagedByValue &&
		cr.Labels[oriav1alpha1.LabelOLMOwnerKind] == oriav1alpha1.OLMOwnerKindClusterExtension &&
		cr.Labels[oriav1alpha1.LabelOLMOwnerName] == name
}

// appliedLabels returns, sorted, the label keys oria's field manager owns on
// obj through server-side apply (from managedFields, which oria's API reader
// returns; the cache strips them).
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

// bundleRoleUpToDate reports whether a bundle-provided role already is as
// oria wants it in mode: in Legacy, oria owns exactly the aggregation label
// of the role's kind and the label is "true"; in any other mode oria owns no
// label on it.
func bundleRoleUpToDate(cur *rbacv1.ClusterRole, k RoleKind, mode oriav1alpha1.RBACMode) bool {
	owned := appliedLabels(cur)
	if mode != oriav1alpha1.RBACModeLegacy {
		return len(owned) == 0
	}
	key := aggregationLabel[k]
	return cur.Labels[key] == "true" && slices.Equal(owned, []string{key})
}
