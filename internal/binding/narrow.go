package binding

import (
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/subjects"
)

// An instance with a spec error writes nothing new, but a revocation still
// lands: it keeps at most what its last valid state granted (the bindings
// that exist) and its current spec still allows. Allowance is what the
// current spec, as far as it can be read, still allows.
type Allowance struct {
	// Targets are where the current spec binds; nil when that cannot be
	// told (an unparseable selector): nothing is allowed anywhere.
	Targets *Targets
	// Roles are the ClusterRoles the current template names (none when it
	// is known not to exist).
	Roles []string
	// Subjects are the current template's subjects.
	Subjects []rbacv1.Subject
	// KnownTemplate says Roles and Subjects decide: the template was read,
	// or is known not to exist (then nothing is allowed). false only when
	// it could not be told; then any role and subject is allowed.
	KnownTemplate bool
}

// Narrow returns the existing bindings the allowance no longer allows:
// outside the current targets (a ClusterRoleBinding once the spec binds in
// namespaces; a RoleBinding in a namespace the spec no longer targets, a
// terminating one aside), of a role the template no longer names, or naming
// a subject the template no longer names.
func Narrow[T client.Object](existing []T, a Allowance, roleOf func(T) string, subjectsOf func(T) []rbacv1.Subject) []T {
	var out []T
	for _, b := range existing {
		if !a.allows(b.GetNamespace(), roleOf(b), subjectsOf(b)) {
			out = append(out, b)
		}
	}
	return out
}

func (a Allowance) allows(namespace, role string, subj []rbacv1.Subject) bool {
	t := a.Targets
	switch {
	case t == nil:
		return false
	case t.Cluster:
		// A cluster-wide grant covers every namespace.
	case namespace == "":
		return false
	case !slices.Contains(t.Namespaces, namespace) && !slices.Contains(t.Terminating, namespace):
		return false
	}
	if !a.KnownTemplate {
		return true
	}
	if !slices.Contains(a.Roles, role) {
		return false
	}
	allowed := subjects.Normalize(a.Subjects, namespace)
	for _, s := range subj {
		if !slices.Contains(allowed, s) {
			return false
		}
	}
	return true
}

// SubjectsOfRoleBinding and SubjectsOfClusterRoleBinding return a binding's
// subjects, for Narrow.
func SubjectsOfRoleBinding(b *rbacv1.RoleBinding) []rbacv1.Subject { return b.Subjects }

// SubjectsOfClusterRoleBinding: see SubjectsOfRoleBinding.
func SubjectsOfClusterRoleBinding(b *rbacv1.ClusterRoleBinding) []rbacv1.Subject { return b.Subjects }
