package binding

import (
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/subjects"
)

// Role is one ClusterRole of a template, resolved.
type Role struct {
	// Name is the ClusterRole's name: the generated name of an inline role
	// with a generateName, the given name otherwise.
	Name string
	// Inline is true when oria creates the role from Rules; false for a
	// reference to an existing ClusterRole.
	Inline bool
	// Rules of an inline role.
	Rules []rbacv1.PolicyRule
}

// RoleName returns the name of role in template (see the package
// documentation).
func RoleName(template string, role oriav1alpha1.ClusterRoleTemplate) string {
	if role.GenerateName != "" {
		return names.Shorten(role.GenerateName+names.Hash(template, role.GenerateName), names.MaxObjectName)
	}
	return role.Name
}

// Roles returns the template's roles in spec order.
func Roles(t *oriav1alpha1.ScopeTemplate) []Role {
	out := make([]Role, len(t.Spec.ClusterRoles))
	for i, r := range t.Spec.ClusterRoles {
		out[i] = Role{Name: RoleName(t.Name, r), Inline: len(r.Rules) > 0, Rules: r.Rules}
	}
	return out
}

// RoleNames returns the names of roles, in order.
func RoleNames(roles []Role) []string {
	out := make([]string, len(roles))
	for i, r := range roles {
		out[i] = r.Name
	}
	return out
}

// ValidateTemplate checks what the CRD schema cannot: role names usable as
// ClusterRole names and unique within the template, rules the API server
// accepts, and subjects a binding can name. It returns nil for a valid
// template, otherwise a SpecError with reason InvalidSpec or InvalidSubject
// listing every problem.
func ValidateTemplate(t *oriav1alpha1.ScopeTemplate) *SpecError {
	var problems []string
	seen := map[string]int{}
	for i, r := range t.Spec.ClusterRoles {
		at := fmt.Sprintf("spec.clusterRoles[%d]", i)
		switch {
		case r.Name == "" && r.GenerateName == "":
			problems = append(problems, at+": one of name or generateName is required")
			continue
		case r.Name != "" && r.GenerateName != "":
			problems = append(problems, at+": name and generateName are mutually exclusive")
			continue
		case r.GenerateName != "" && len(r.Rules) == 0:
			problems = append(problems, at+": generateName needs rules (only an inline role has a generated name)")
			continue
		}
		name := RoleName(t.Name, r)
		for _, msg := range path.IsValidPathSegmentName(name) {
			problems = append(problems, fmt.Sprintf("%s: ClusterRole name %q: %s", at, name, msg))
		}
		if IsGateName(name) {
			problems = append(problems, fmt.Sprintf("%s: ClusterRole %q is a gate's name (%s...): oria fills and empties a time-bound grant's gate itself, so no template may name one; name the roles it stands for", at, name, gatePrefix))
		}
		if j, dup := seen[name]; dup {
			problems = append(problems, fmt.Sprintf("%s: ClusterRole %q is also spec.clusterRoles[%d]", at, name, j))
		} else {
			seen[name] = i
		}
		for k, rule := range r.Rules {
			for _, msg := range validatePolicyRule(rule) {
				problems = append(problems, fmt.Sprintf("%s.rules[%d]: %s", at, k, msg))
			}
		}
	}
	if len(problems) > 0 {
		return &SpecError{Reason: oriav1alpha1.ReasonInvalidSpec, Message: strings.Join(problems, "; ")}
	}
	if problems := subjects.Validate(t.Spec.BindingTemplate.Subjects, "spec.bindingTemplate.subjects"); len(problems) > 0 {
		return &SpecError{Reason: oriav1alpha1.ReasonInvalidSubject, Message: strings.Join(problems, "; ")}
	}
	return nil
}

// validatePolicyRule mirrors the API server's validation of a ClusterRole
// rule, so a bad rule is reported on the template rather than as a failed
// write.
func validatePolicyRule(rule rbacv1.PolicyRule) []string {
	var problems []string
	if len(rule.Verbs) == 0 {
		problems = append(problems, "verbs must contain at least one value")
	}
	if len(rule.NonResourceURLs) > 0 {
		if len(rule.APIGroups) > 0 || len(rule.Resources) > 0 || len(rule.ResourceNames) > 0 {
			problems = append(problems, "a rule cannot apply to both resources and non-resource URLs")
		}
		return problems
	}
	if len(rule.APIGroups) == 0 {
		problems = append(problems, `resource rules need at least one API group ("" is the core group)`)
	}
	if len(rule.Resources) == 0 {
		problems = append(problems, "resource rules need at least one resource")
	}
	return problems
}

// ClusterRoles returns the inline ClusterRoles of a valid template, sorted by
// name, as oria writes them.
func ClusterRoles(t *oriav1alpha1.ScopeTemplate) []*rbacv1.ClusterRole {
	owner := ownership.Ref(ownership.KindScopeTemplate, t.Name, t.UID)
	var out []*rbacv1.ClusterRole
	for _, r := range Roles(t) {
		if !r.Inline {
			continue
		}
		out = append(out, &rbacv1.ClusterRole{
			TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{
				Name:            r.Name,
				Labels:          ownership.TemplateLabels(t.Name),
				OwnerReferences: []metav1.OwnerReference{owner},
			},
			Rules: r.Rules,
		})
	}
	sortByName(out)
	return out
}
