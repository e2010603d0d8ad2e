package binding

import (
	"cmp"
	"fmt"
	"slices"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// Grant is one ClusterRole bound in one place: in a namespace (a
// RoleBinding) or, when Namespace is "", cluster-wide (a
// ClusterRoleBinding). It is the unit the escalation guard checks: whoever
// asks oria for a grant must be allowed to create that binding themselves.
type Grant struct {
	// Role is the ClusterRole's name.
	Role string
	// Namespace is where the role is bound; "" means cluster-wide.
	Namespace string
}

// ClusterWide reports whether the grant binds the role cluster-wide.
func (g Grant) ClusterWide() bool { return g.Namespace == "" }

// Where says where the grant binds, for messages: `in namespace "a"` or
// "cluster-wide".
func (g Grant) Where() string {
	if g.ClusterWide() {
		return "cluster-wide"
	}
	return fmt.Sprintf("in namespace %q", g.Namespace)
}

func (g Grant) String() string { return fmt.Sprintf("ClusterRole %q %s", g.Role, g.Where()) }

// InstanceGrants returns what an instance with spec grants when its template
// has the given roles, as the widest set of places its bindings can reach,
// sorted by namespace (cluster-wide first) and role, without duplicates:
//
//   - no namespaces and no namespaceSelector: every role cluster-wide (what
//     ResolveTargets and the ClusterRoleBindings do);
//   - a namespaceSelector: every role cluster-wide as well. A selector
//     matches namespaces by labels, so the namespaces it reaches change
//     whenever someone labels or creates a namespace, long after the
//     instance was written; the only place that bounds it is the cluster;
//   - only namespaces: every role in each listed namespace (whether it
//     exists yet or not: a listed namespace is bound when it is created).
//
// The list is the same whether the roles exist or not.
func InstanceGrants(spec oriav1alpha1.ScopeInstanceSpec, roles []string) []Grant {
	var out []Grant
	if IsClusterWide(spec) || spec.NamespaceSelector != nil {
		for _, r := range roles {
			out = append(out, Grant{Role: r})
		}
	} else {
		for _, ns := range spec.Namespaces {
			for _, r := range roles {
				out = append(out, Grant{Role: r, Namespace: ns})
			}
		}
	}
	return SortGrants(out)
}

// SortGrants sorts grants by namespace (cluster-wide first) then role and
// removes duplicates.
func SortGrants(grants []Grant) []Grant {
	slices.SortFunc(grants, func(a, b Grant) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Role, b.Role))
	})
	return slices.Compact(grants)
}
