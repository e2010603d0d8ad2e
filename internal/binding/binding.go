// Package binding is the desired state of oria's binding layer: what the
// ScopeTemplate and ScopeInstance controllers write, as pure deterministic
// functions (no client, no clock), plus the small write engine and cache
// indexes both controllers share.
//
// # Names
//
// Every generated name is a function of the owning object's name and the
// role's name, never random, so a reconcile, a restart or a second replica
// always finds the same objects again:
//
//   - an inline role with a name is created under that name;
//   - an inline role with a generateName prefix is created as
//     "<generateName><hash>" with hash = names.Hash(template, generateName)
//     (10 hex characters), e.g. "fooClusterRole-3f9a0c1b2d" (a prefix is at
//     most 200 characters, so the name always fits);
//   - the RoleBindings (in every target namespace) and the
//     ClusterRoleBinding (cluster-wide) that bind a role for an instance are
//     named "<instance>-<role>-<hash>" with hash = names.Hash(instance, role),
//     shortened with names.Shorten to 253 characters. The hash keeps the
//     name unique per (instance, role) even where a plain join would be
//     ambiguous ("a-b"+"c" and "a"+"b-c"); the prefix keeps it readable in
//     `kubectl get rolebindings`.
//
// # Labels and ownership
//
// Generated ClusterRoles carry app.kubernetes.io/managed-by=oria and
// oria.operatorframework.io/scope-template=<template>; bindings carry
// managed-by, scope-instance=<instance> and scope-template=<template> (label
// values go through names.LabelValue). Each has a controller ownerReference
// to its ScopeTemplate or ScopeInstance, so the garbage collector finishes a
// cleanup oria could not do (for example while oria was down). An object
// with the right name but neither the labels nor the ownerReference was not
// created by oria for that owner and is never modified.
package binding

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
)

// Kinds of the owners, as written in ownerReferences.
const (
	KindScopeTemplate = "ScopeTemplate"
	KindScopeInstance = "ScopeInstance"
)

// SpecError is a problem with a spec that the user must fix. Controllers
// report it as a condition (Reason, Message) and do not retry.
type SpecError struct {
	// Reason is a condition reason from api/v1alpha1.
	Reason string
	// Message says which field is wrong and why.
	Message string
}

func (e *SpecError) Error() string { return e.Reason + ": " + e.Message }

func specErrorf(reason, format string, args ...any) *SpecError {
	return &SpecError{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// TemplateLabels are the labels of a ClusterRole generated for a template.
func TemplateLabels(template string) map[string]string {
	return map[string]string{
		oriav1alpha1.LabelManagedBy:     oriav1alpha1.ManagedByValue,
		oriav1alpha1.LabelScopeTemplate: names.LabelValue(template),
	}
}

// InstanceLabels are the labels of a binding generated for an instance of a
// template.
func InstanceLabels(instance, template string) map[string]string {
	return map[string]string{
		oriav1alpha1.LabelManagedBy:     oriav1alpha1.ManagedByValue,
		oriav1alpha1.LabelScopeInstance: names.LabelValue(instance),
		oriav1alpha1.LabelScopeTemplate: names.LabelValue(template),
	}
}

// OwnerReference returns the controller ownerReference to an oria object.
func OwnerReference(kind, name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         oriav1alpha1.GroupVersion.String(),
		Kind:               kind,
		Name:               name,
		UID:                uid,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

// BindingName is the name of the RoleBindings and of the ClusterRoleBinding
// that bind role for instance (see the package documentation).
func BindingName(instance, role string) string {
	return names.Shorten(instance+"-"+role+"-"+names.Hash(instance, role), names.MaxObjectName)
}

// NormalizeSubjects returns subjects as the API server stores them in a
// binding in namespace ("" for a ClusterRoleBinding): User and Group get the
// RBAC API group when it is omitted, and a ServiceAccount without a namespace
// gets namespace. Comparing normalized subjects with what the API returns
// keeps an unchanged binding from looking changed.
func NormalizeSubjects(subjects []rbacv1.Subject, namespace string) []rbacv1.Subject {
	out := make([]rbacv1.Subject, len(subjects))
	for i, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind, rbacv1.GroupKind:
			if s.APIGroup == "" {
				s.APIGroup = rbacv1.GroupName
			}
		case rbacv1.ServiceAccountKind:
			if s.Namespace == "" {
				s.Namespace = namespace
			}
		}
		out[i] = s
	}
	return out
}

// labelsContain reports whether have holds every key of want with the same
// value. Extra labels someone adds to an oria object are not drift.
func labelsContain(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// controlledBy reports whether obj's controller ownerReference is exactly
// ref (same kind, name and UID).
func controlledBy(refs []metav1.OwnerReference, ref metav1.OwnerReference) bool {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller {
			return r.Kind == ref.Kind && r.Name == ref.Name && r.UID == ref.UID && r.APIVersion == ref.APIVersion
		}
	}
	return false
}

// controllerName returns the name of obj's controller of the given kind in
// oria's API group, or "".
func controllerName(refs []metav1.OwnerReference, kind string) string {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller && r.Kind == kind && strings.HasPrefix(r.APIVersion, oriav1alpha1.GroupVersion.Group+"/") {
			return r.Name
		}
	}
	return ""
}

// ControllerName returns the name of the oria object of kind (ScopeTemplate
// or ScopeInstance) that controls an object with these ownerReferences, or
// "" when none does.
func ControllerName(refs []metav1.OwnerReference, kind string) string {
	return controllerName(refs, kind)
}

// withOwner returns refs with every controller reference replaced by ref;
// other references (someone else's, not controllers) are kept.
func withOwner(refs []metav1.OwnerReference, ref metav1.OwnerReference) []metav1.OwnerReference {
	out := slices.DeleteFunc(slices.Clone(refs), func(r metav1.OwnerReference) bool {
		return (r.Controller != nil && *r.Controller) || r.UID == ref.UID
	})
	return append(out, ref)
}

// mergeLabels returns have with want's labels set.
func mergeLabels(have, want map[string]string) map[string]string {
	out := make(map[string]string, len(have)+len(want))
	for k, v := range have {
		out[k] = v
	}
	for k, v := range want {
		out[k] = v
	}
	return out
}

// Enumerate joins items for a message, naming at most max of them:
// "a, b, c and 7 more".
func Enumerate(items []string, max int) string {
	if len(items) <= max {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:max], ", "), len(items)-max)
}
