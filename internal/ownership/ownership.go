// Package ownership is the one definition of "did oria create this object,
// for that owner": the labels oria puts on what it creates, the controller
// ownerReferences it sets, and the predicates every controller, the write
// engine and the admission guard use to tell oria's objects from anyone
// else's. An object that fails these checks is never modified by oria.
//
// Every object oria creates carries oria.operatorframework.io/managed=true
// (the cache filter; app.kubernetes.io/managed-by=oria too, except on the
// roles generated for an extension, which say Helm: see
// olm.AdoptionLabels) plus one label naming its owner (extension,
// scope-template, scope-instance or rbac-policy; values through
// names.LabelValue), and a controller ownerReference to that owner, so
// that the garbage collector finishes a cleanup oria could not do.
package ownership

import (
	"strconv"
	"strings"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/olm"
)

// Kinds of oria's own objects, as written in ownerReferences.
const (
	KindScopeTemplate = "ScopeTemplate"
	KindScopeInstance = "ScopeInstance"
	KindRBACPolicy    = "RBACPolicy"
	KindAccessRequest = "AccessRequest"
)

// managedLabels are the labels every object oria creates carries, but for
// the roles generated for an extension (ExtensionRoleLabels).
func managedLabels() map[string]string {
	return map[string]string{
		oriav1alpha1.LabelManaged:   oriav1alpha1.ManagedValue,
		oriav1alpha1.LabelManagedBy: oriav1alpha1.ManagedByValue,
	}
}

// IsManaged reports whether obj carries oria's LabelManaged: created by
// oria, for an owner the other predicates tell.
func IsManaged(obj metav1.Object) bool {
	return obj.GetLabels()[oriav1alpha1.LabelManaged] == oriav1alpha1.ManagedValue
}

// ExtensionRoleLabels are the labels of the ClusterRole of kind k generated
// for the extension named ext (without the Legacy aggregation label),
// Helm's adoption label included (ExtensionRoleAnnotations).
func ExtensionRoleLabels(ext string, k names.RoleKind) map[string]string {
	l := olm.AdoptionLabels()
	l[oriav1alpha1.LabelManaged] = oriav1alpha1.ManagedValue
	l[oriav1alpha1.LabelExtension] = names.LabelValue(ext)
	l[oriav1alpha1.LabelRole] = string(k)
	return l
}

// ExtensionRoleAnnotations are the annotations of a ClusterRole generated
// for the CRD named crd of the extension named ext, installed in namespace:
// the CRD, and the extension's Helm release, which may adopt the role when
// a later bundle ships one under its name (olm.AdoptionLabels).
func ExtensionRoleAnnotations(ext, namespace, crd string) map[string]string {
	a := olm.AdoptionAnnotations(ext, namespace)
	a[oriav1alpha1.AnnotationCRD] = crd
	return a
}

// ReleasedByExtensionRole are the label and annotation keys oria removes
// from a role it generated once its extension's bundle adopted it (the
// aggregation label, which oria keeps deciding on, and Helm's metadata,
// which are the release's now, stay).
func ReleasedByExtensionRole() (labels, annotations []string) {
	return []string{oriav1alpha1.LabelManaged, oriav1alpha1.LabelExtension, oriav1alpha1.LabelRole},
		[]string{oriav1alpha1.AnnotationCRD}
}

// TemplateLabels are the labels of a ClusterRole generated for a template.
func TemplateLabels(template string) map[string]string {
	l := managedLabels()
	l[oriav1alpha1.LabelScopeTemplate] = names.LabelValue(template)
	return l
}

// InstanceLabels are the labels of a binding generated for an instance of a
// template.
func InstanceLabels(instance, template string) map[string]string {
	l := managedLabels()
	l[oriav1alpha1.LabelScopeInstance] = names.LabelValue(instance)
	l[oriav1alpha1.LabelScopeTemplate] = names.LabelValue(template)
	return l
}

// GateLabels are the labels of the gate of an instance (a ClusterRole its
// bindings bind in place of its template's roles; binding.GateRole): not
// the template's, whose inline roles the ScopeTemplate controller keeps.
func GateLabels(instance string) map[string]string {
	l := managedLabels()
	l[oriav1alpha1.LabelScopeInstance] = names.LabelValue(instance)
	return l
}

// PolicyLabels are the labels of the ScopeTemplate and ScopeInstance
// compiled from the named RBACPolicy.
func PolicyLabels(policy string) map[string]string {
	l := managedLabels()
	l[oriav1alpha1.LabelRBACPolicy] = names.LabelValue(policy)
	return l
}

// AccessRequestLabels are the labels of the ScopeTemplate and
// ScopeInstance compiled for the named AccessRequest (its activation).
func AccessRequestLabels(request string) map[string]string {
	l := managedLabels()
	l[oriav1alpha1.LabelAccessRequest] = names.LabelValue(request)
	return l
}

// Ref returns the controller ownerReference to the oria object of kind
// (KindScopeTemplate, ...) with this name and UID.
func Ref(kind, name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         oriav1alpha1.GroupVersion.String(),
		Kind:               kind,
		Name:               name,
		UID:                uid,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

// ExtensionRef returns the controller ownerReference generated roles carry
// to their ClusterExtension.
func ExtensionRef(name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: ocv1.GroupVersion.String(),
		Kind:       ocv1.ClusterExtensionKind,
		Name:       name,
		UID:        uid,
		Controller: ptr.To(true),
	}
}

// HasLabels reports whether have holds every key of want with the same
// value. Extra labels someone adds to an oria object are not drift.
func HasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// IsControlledBy reports whether the controller reference among refs is
// exactly ref (kind, name, UID and API version).
func IsControlledBy(refs []metav1.OwnerReference, ref metav1.OwnerReference) bool {
	c := controller(refs)
	return c != nil && c.Kind == ref.Kind && c.Name == ref.Name && c.UID == ref.UID && c.APIVersion == ref.APIVersion
}

// ControllerName returns the name of the oria object of kind that controls
// an object with these ownerReferences, or "" when none does.
func ControllerName(refs []metav1.OwnerReference, kind string) string {
	return ControllerOf(refs, oriav1alpha1.GroupVersion.Group, kind)
}

// ControllerOf returns the name of the object of kind in API group that
// controls an object with these ownerReferences, or "" when none does.
func ControllerOf(refs []metav1.OwnerReference, group, kind string) string {
	if c := controller(refs); c != nil && c.Kind == kind && strings.HasPrefix(c.APIVersion, group+"/") {
		return c.Name
	}
	return ""
}

// NotControlledByOther reports whether obj has no controller of kind other
// than the one named name: label values of long names are hashed, so two
// owners can share one, and the controller reference decides.
func NotControlledByOther(obj metav1.Object, kind, name string) bool {
	owner := ControllerName(obj.GetOwnerReferences(), kind)
	return owner == "" || owner == name
}

// ControlledByUID reports whether obj's controller has this UID.
func ControlledByUID(obj metav1.Object, uid types.UID) bool {
	c := controller(obj.GetOwnerReferences())
	return c != nil && c.UID == uid
}

func controller(refs []metav1.OwnerReference) *metav1.OwnerReference {
	for i := range refs {
		if ptr.Deref(refs[i].Controller, false) {
			return &refs[i]
		}
	}
	return nil
}

// TemplateOwns reports whether obj (a ClusterRole) was created by oria for
// the named template: it carries the template's labels or is controlled by a
// ScopeTemplate of that name. (A role of a deleted template of the same name
// counts: the new template adopts it.)
func TemplateOwns(obj metav1.Object, template string) bool {
	return HasLabels(obj.GetLabels(), TemplateLabels(template)) ||
		ControllerName(obj.GetOwnerReferences(), KindScopeTemplate) == template
}

// InlineRoleOf returns the ScopeTemplate whose inline role obj (a
// ClusterRole) is, or "": a role oria writes from a template's rules and
// rewrites whenever that template changes. The label may be written by
// anyone who may patch ClusterRoles; it only makes the guard stricter (see
// authz: only "bind" allows binding such a role).
func InlineRoleOf(obj metav1.Object) string {
	if name := ControllerName(obj.GetOwnerReferences(), KindScopeTemplate); name != "" {
		return name
	}
	if IsManaged(obj) {
		return obj.GetLabels()[oriav1alpha1.LabelScopeTemplate]
	}
	return ""
}

// InstanceOwner returns whether an object (a binding) was created by oria
// for the named instance, with the labels it looks for computed once: a
// reconcile asks it of every binding of the instance, thousands of them.
func InstanceOwner(instance string) func(metav1.Object) bool {
	labels := map[string]string{
		oriav1alpha1.LabelManaged:       oriav1alpha1.ManagedValue,
		oriav1alpha1.LabelScopeInstance: names.LabelValue(instance),
	}
	return func(obj metav1.Object) bool {
		return HasLabels(obj.GetLabels(), labels) || ControllerName(obj.GetOwnerReferences(), KindScopeInstance) == instance
	}
}

// ExtensionOwns reports whether obj (a ClusterRole) is one oria generated
// for the extension named name and UID uid. A role that carries
// operator-controller's owner labels never is: its bundle installed or
// adopted it (olm.AdoptionLabels), whoever created it first. Otherwise,
// either it carries oria's labels
// for that extension and its controller, if it still has one, is an
// extension of that name (a role whose controller is something else is not
// oria's to change, labels or not; an extension deleted and re-created under
// the same name is the same extension, as it is to operator-controller's
// owner labels), or its controller is exactly this extension (oria's role
// whose labels someone removed).
func ExtensionOwns(obj metav1.Object, name string, uid types.UID) bool {
	if olm.ExtensionOf(obj) != "" {
		return false
	}
	ref := controller(obj.GetOwnerReferences())
	if isExtensionRef(ref, name) && ref.UID == uid {
		return true
	}
	l := obj.GetLabels()
	if l[oriav1alpha1.LabelManaged] != oriav1alpha1.ManagedValue || l[oriav1alpha1.LabelExtension] != names.LabelValue(name) {
		return false
	}
	if ref != nil {
		return isExtensionRef(ref, name)
	}
	_, ok := obj.GetAnnotations()[oriav1alpha1.AnnotationCRD]
	return ok
}

// ExtensionOf describes the owner of an oria ClusterRole generated for an
// extension, for a conflict message.
func ExtensionOf(obj metav1.Object) string {
	if ref := controller(obj.GetOwnerReferences()); ref != nil {
		return ref.Kind + " " + strconv.Quote(ref.Name)
	}
	return "label " + oriav1alpha1.LabelExtension + "=" + strconv.Quote(obj.GetLabels()[oriav1alpha1.LabelExtension])
}

func isExtensionRef(ref *metav1.OwnerReference, name string) bool {
	if ref == nil || ref.Kind != ocv1.ClusterExtensionKind || ref.Name != name {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == ocv1.GroupVersion.Group
}

// IsBundleRole reports whether obj was installed by operator-controller for
// the extension named name: its owner labels say so. That includes a role
// oria generated and the extension's Helm release adopted since
// (olm.AdoptionLabels); oria releases its fields on such a role
// (ReleasedByExtensionRole).
func IsBundleRole(obj metav1.Object, name string) bool {
	return olm.ExtensionOf(obj) == name
}
