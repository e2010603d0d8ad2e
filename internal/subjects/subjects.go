// Package subjects is the one definition of how oria reads the subjects of
// its objects (ScopeTemplate.spec.bindingTemplate.subjects,
// RBACPolicy.spec.subjects): which ones a binding can name, and how they look
// once the API server has stored them; and who a subject is to the API
// server's authorizer (Identity: a ServiceAccount as a user is spelled only
// here, ServiceAccountUser). The controllers, the RBACPolicy compiler, the
// permission checker (internal/authz), the RBAC rules in memory
// (internal/rbacrules) and the kubectl plugin all use it, so a subject is
// judged the same way everywhere.
package subjects

import (
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Normalize returns subjects as the API server stores them in a binding in
// namespace ("" for a ClusterRoleBinding): User and Group get the RBAC API
// group when it is omitted, and a ServiceAccount without a namespace gets
// namespace. Comparing normalized subjects with what the API returns keeps an
// unchanged binding from looking changed.
func Normalize(in []rbacv1.Subject, namespace string) []rbacv1.Subject {
	if in == nil {
		return nil
	}
	out := make([]rbacv1.Subject, len(in))
	for i, s := range in {
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

// DependOnNamespace reports whether Normalize's result depends on the
// namespace: a ServiceAccount without one takes the binding's.
func DependOnNamespace(in []rbacv1.Subject) bool {
	for _, s := range in {
		if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == "" {
			return true
		}
	}
	return false
}

// Validate returns a message for every subject a binding cannot name,
// mirroring the API server's checks, each prefixed with its field path
// (path is the path of the list, e.g. "spec.subjects"): the kind must be
// User, Group or ServiceAccount and the name non-empty; a ServiceAccount has
// no API group, a valid (lowercase DNS subdomain) name and, when given, a
// valid namespace; User and Group have no API group other than
// rbac.authorization.k8s.io.
func Validate(subjects []rbacv1.Subject, path string) []string {
	var problems []string
	for i, s := range subjects {
		at := fmt.Sprintf("%s[%d]", path, i)
		if s.Name == "" {
			problems = append(problems, at+": name is required")
		}
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			if s.APIGroup != "" {
				problems = append(problems, fmt.Sprintf("%s: a ServiceAccount has no apiGroup (got %q)", at, s.APIGroup))
			}
			if s.Name != "" {
				for _, msg := range validation.IsDNS1123Subdomain(s.Name) {
					problems = append(problems, fmt.Sprintf("%s: ServiceAccount name %q is not valid: %s", at, s.Name, msg))
				}
			}
			if s.Namespace != "" {
				for _, msg := range validation.IsDNS1123Label(s.Namespace) {
					problems = append(problems, fmt.Sprintf("%s: namespace %q is not valid: %s", at, s.Namespace, msg))
				}
			}
		case rbacv1.UserKind, rbacv1.GroupKind:
			if s.APIGroup != "" && s.APIGroup != rbacv1.GroupName {
				problems = append(problems, fmt.Sprintf("%s: apiGroup of a %s must be %q (got %q)", at, s.Kind, rbacv1.GroupName, s.APIGroup))
			}
		default:
			problems = append(problems, fmt.Sprintf("%s: kind %q is not one of User, Group, ServiceAccount", at, s.Kind))
		}
	}
	return problems
}

// RequireNamespaces returns a message for every ServiceAccount subject
// without a namespace, for places where none can be implied: a
// ClusterRoleBinding (cluster-wide grant), or an RBACPolicy, whose subjects
// are named once for every namespace it targets. The message is
// "<path>[i]: ServiceAccount "<name>" <says>".
func RequireNamespaces(subjects []rbacv1.Subject, path, says string) []string {
	var problems []string
	for i, s := range subjects {
		if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == "" {
			problems = append(problems, fmt.Sprintf("%s[%d]: ServiceAccount %q %s", path, i, s.Name, says))
		}
	}
	return problems
}
