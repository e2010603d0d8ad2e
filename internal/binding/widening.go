package binding

import (
	"slices"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/subjects"
)

// Widened returns the roles of t that an update from old gives to someone
// who did not have them: every role when a subject is added, else the
// roles added (by name). An update that only removes subjects or roles, or
// changes inline rules (checked as a ClusterRole write), widens nothing
// here.
//
// A template grants wherever an instance binds it, and any instance may
// bind it later, an admin's included: what an update widens is checked
// cluster-wide, so that an admin who reviewed a template binds what they
// reviewed.
func Widened(old, t *oriav1alpha1.ScopeTemplate) []Role {
	roles := Roles(t)
	before := subjects.Normalize(old.Spec.BindingTemplate.Subjects, "")
	for _, s := range subjects.Normalize(t.Spec.BindingTemplate.Subjects, "") {
		if !slices.Contains(before, s) {
			return roles
		}
	}
	had := RoleNames(Roles(old))
	return slices.DeleteFunc(roles, func(r Role) bool { return slices.Contains(had, r.Name) })
}
