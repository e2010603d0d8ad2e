package binding

import (
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// Set is bindings of one grant, of each kind oria writes: the one type the
// binding layer passes them in (wanted, existing, to revoke), so that a
// new kind of binding is a field here, and its writer's, not a slice more
// through every caller.
type Set struct {
	RoleBindings        []*rbacv1.RoleBinding
	ClusterRoleBindings []*rbacv1.ClusterRoleBinding
}

// Len counts the bindings of s.
func (s Set) Len() int { return len(s.RoleBindings) + len(s.ClusterRoleBindings) }

// Objects returns every binding of s as an object, RoleBindings first.
func (s Set) Objects() []client.Object {
	return append(Objects(s.RoleBindings), Objects(s.ClusterRoleBindings)...)
}

// Objects converts a typed slice to client.Objects.
func Objects[T client.Object](objs []T) []client.Object {
	out := make([]client.Object, len(objs))
	for i, o := range objs {
		out[i] = o
	}
	return out
}

// Keys returns the keys (namespace and name) of the bindings of s.
func (s Set) Keys() map[types.NamespacedName]bool {
	out := make(map[types.NamespacedName]bool, s.Len())
	for _, o := range s.Objects() {
		out[key(o)] = true
	}
	return out
}

// Union returns s and the bindings of o whose key s does not hold.
func (s Set) Union(o Set) Set {
	return Set{RoleBindings: unionByKey(s.RoleBindings, o.RoleBindings), ClusterRoleBindings: unionByKey(s.ClusterRoleBindings, o.ClusterRoleBindings)}
}

func unionByKey[T client.Object](a, b []T) []T {
	seen := map[types.NamespacedName]bool{}
	for _, o := range a {
		seen[key(o)] = true
	}
	for _, o := range b {
		if !seen[key(o)] {
			a = append(a, o)
		}
	}
	return a
}

// Stale returns the bindings of s that keep does not hold (see Stale).
func (s Set) Stale(keep map[types.NamespacedName]bool, t Targets) Set {
	return Set{RoleBindings: Stale(s.RoleBindings, keep, t), ClusterRoleBindings: Stale(s.ClusterRoleBindings, keep, t)}
}

// Narrow returns the bindings of s that a no longer allows (see Narrow).
func (s Set) Narrow(a Allowance) Set {
	return Set{RoleBindings: Narrow(s.RoleBindings, a, RoleOfRoleBinding, SubjectsOfRoleBinding),
		ClusterRoleBindings: Narrow(s.ClusterRoleBindings, a, RoleOfClusterRoleBinding, SubjectsOfClusterRoleBinding)}
}

// BeyondCeiling returns the bindings of s that covered does not hold whose
// ceiling record is not their role's (see BeyondCeiling).
func (s Set) BeyondCeiling(covered map[types.NamespacedName]bool, ceilings map[string]string) Set {
	return Set{RoleBindings: BeyondCeiling(s.RoleBindings, covered, ceilings, RoleOfRoleBinding),
		ClusterRoleBindings: BeyondCeiling(s.ClusterRoleBindings, covered, ceilings, RoleOfClusterRoleBinding)}
}

// RoleOf returns the ClusterRole a binding of either kind binds ("" for
// another object).
func RoleOf(b client.Object) string {
	switch b := b.(type) {
	case *rbacv1.RoleBinding:
		return RoleOfRoleBinding(b)
	case *rbacv1.ClusterRoleBinding:
		return RoleOfClusterRoleBinding(b)
	}
	return ""
}

// RoleOfRoleBinding and RoleOfClusterRoleBinding return the ClusterRole a
// binding oria wrote binds ("" for a Role: oria binds only ClusterRoles).
func RoleOfRoleBinding(b *rbacv1.RoleBinding) string { return clusterRoleOf(b.RoleRef) }

// RoleOfClusterRoleBinding: see RoleOfRoleBinding.
func RoleOfClusterRoleBinding(b *rbacv1.ClusterRoleBinding) string { return clusterRoleOf(b.RoleRef) }

func clusterRoleOf(ref rbacv1.RoleRef) string {
	if ref.Kind != "ClusterRole" {
		return ""
	}
	return ref.Name
}

// Bindings returns the bindings of inst binding roles to subj where t
// says: one ClusterRoleBinding per role when t is cluster-wide, else one
// RoleBinding per role in each of t's namespaces.
func Bindings(inst *oriav1alpha1.ScopeInstance, template string, roles []string, subj []rbacv1.Subject, t Targets) Set {
	if t.Cluster {
		return Set{ClusterRoleBindings: ClusterRoleBindings(inst, template, roles, subj)}
	}
	return Set{RoleBindings: RoleBindings(inst, template, roles, subj, t.Namespaces)}
}

// SetOf sorts bindings of any kind into a Set, each kind in the order
// given; another object is left out.
func SetOf(objs ...client.Object) Set {
	var s Set
	for _, o := range objs {
		switch b := o.(type) {
		case *rbacv1.RoleBinding:
			s.RoleBindings = append(s.RoleBindings, b)
		case *rbacv1.ClusterRoleBinding:
			s.ClusterRoleBindings = append(s.ClusterRoleBindings, b)
		}
	}
	return s
}

// Plus returns the bindings of s followed by those of o, kind by kind.
func (s Set) Plus(o Set) Set {
	return Set{RoleBindings: slices.Concat(s.RoleBindings, o.RoleBindings), ClusterRoleBindings: slices.Concat(s.ClusterRoleBindings, o.ClusterRoleBindings)}
}

// Filter returns the bindings of s that keep accepts, in order.
func (s Set) Filter(keep func(client.Object) bool) Set {
	return Set{RoleBindings: filter(s.RoleBindings, keep), ClusterRoleBindings: filter(s.ClusterRoleBindings, keep)}
}

func filter[T client.Object](objs []T, keep func(client.Object) bool) []T {
	var out []T
	for _, o := range objs {
		if keep(o) {
			out = append(out, o)
		}
	}
	return out
}

// ByKey indexes the bindings of s by key (namespace and name).
func (s Set) ByKey() map[types.NamespacedName]client.Object {
	out := make(map[types.NamespacedName]client.Object, s.Len())
	for _, o := range s.Objects() {
		out[key(o)] = o
	}
	return out
}
