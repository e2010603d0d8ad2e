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

// KindOutcome is the outcomes of the bindings of one kind of a
// binding.Set, in the set's order.
type KindOutcome struct {
	// Kind is the bindings' kind (Kind.Name).
	Kind string
	// Namespaced: the kind's bindings are in namespaces.
	Namespaced bool
	Outcomes   []Outcome
}

// SetOutcome is one outcome per binding of a binding.Set, keyed like the
// set: kind by kind, in its order (EnsureSet, DeleteSet).
type SetOutcome []KindOutcome

// All returns every outcome of s, kind after kind: in the order of the
// set's Objects.
func (s SetOutcome) All() []Outcome {
	var out []Outcome
	for _, k := range s {
		switch {
		case len(k.Outcomes) == 0:
		case out == nil:
			// One kind alone (the usual grant): its outcomes as they
			// are, not copied.
			out = k.Outcomes[:len(k.Outcomes):len(k.Outcomes)]
		default:
			out = append(out, k.Outcomes...)
		}
	}
	return out
}

// Len counts the outcomes of s.
func (s SetOutcome) Len() int {
	n := 0
	for _, k := range s {
		n += len(k.Outcomes)
	}
	return n
}

// Plus returns the outcomes of s followed by those of o, kind by kind
// (either may be empty).
func (s SetOutcome) Plus(o SetOutcome) SetOutcome {
	if len(s) == 0 {
		return o
	}
	out := make(SetOutcome, len(s))
	for i, k := range s {
		out[i] = k
		if i < len(o) {
			out[i].Outcomes = append(k.Outcomes[:len(k.Outcomes):len(k.Outcomes)], o[i].Outcomes...)
		}
	}
	return out
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
