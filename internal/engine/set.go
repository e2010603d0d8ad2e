package engine

import (
	"context"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/binding"
)

// The writer of a binding.Set: every kind of binding a grant has, ensured
// or deleted with its Kind, kind after kind in the set's order. A new kind
// of binding is a field of binding.Set, its Kind (kinds.go) and a line in
// each function here; its callers only ever name the Set.

// The writer of every kind of a binding.Set, for the ScopeInstance
// controller, its one caller:
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings;clusterrolebindings,verbs=get;list;watch;create;update;patch;delete

// SetKind is one kind of binding a binding.Set holds: an empty object of
// it (what to watch) and its Kind's name (what the Memo is told of it).
type SetKind struct {
	Object client.Object
	Name   string
}

// SetKinds returns the kinds of a binding.Set, in its order.
func SetKinds() []SetKind {
	return []SetKind{{&rbacv1.RoleBinding{}, RoleBindingKind.Name}, {&rbacv1.ClusterRoleBinding{}, ClusterRoleBindingKind.Name}}
}

// EnsureSet ensures every binding of want (see Ensure), existing holding
// them as oria's cache shows them.
func EnsureSet(ctx context.Context, w *Writer, owns func(client.Object) bool, want, existing binding.Set) SetOutcome {
	return SetOutcome{
		{Kind: RoleBindingKind.Name, Namespaced: true, Outcomes: Ensure(ctx, w, RoleBindingKind, owns, want.RoleBindings, ByKey(existing.RoleBindings))},
		{Kind: ClusterRoleBindingKind.Name, Outcomes: Ensure(ctx, w, ClusterRoleBindingKind, owns, want.ClusterRoleBindings, ByKey(existing.ClusterRoleBindings))},
	}
}

// DeleteSet deletes every binding of s (see Delete).
func DeleteSet(ctx context.Context, w *Writer, s binding.Set) SetOutcome {
	return SetOutcome{
		{Kind: RoleBindingKind.Name, Namespaced: true, Outcomes: Delete(ctx, w, RoleBindingKind.Name, s.RoleBindings)},
		{Kind: ClusterRoleBindingKind.Name, Outcomes: Delete(ctx, w, ClusterRoleBindingKind.Name, s.ClusterRoleBindings)},
	}
}
