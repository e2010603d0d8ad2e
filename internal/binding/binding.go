// Package binding is the desired state of oria's binding layer: what the
// ScopeTemplate and ScopeInstance controllers write and what the admission
// guard checks, as pure deterministic functions (no client, no clock). The
// writes themselves go through package engine.
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
// managed-by, scope-instance=<instance> and scope-template=<template>. Each
// has a controller ownerReference to its ScopeTemplate or ScopeInstance.
// Package ownership defines these labels and the checks on them.
package binding

import (
	"fmt"

	"github.com/operator-framework/oria/internal/names"
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

// BindingName is the name of the RoleBindings and of the ClusterRoleBinding
// that bind role for instance (see the package documentation).
func BindingName(instance, role string) string {
	return names.Shorten(instance+"-"+role+"-"+names.Hash(instance, role), names.MaxObjectName)
}
