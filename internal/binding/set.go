package binding

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
