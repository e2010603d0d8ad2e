package admission

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/policy"
	"github.com/operator-framework/oria/internal/publish"
)

// SpecErrors returns what the controllers would report as a spec error in
// obj, one message per problem, each naming its field path; nil when there
// is none. These are refused at admission for everyone, admins included
// (before the check of what the requester may grant): a write that only
// puts an object into an error state would freeze it, and with it grants
// someone else made, or their narrowing of them. What is left to report at
// run time are missing references (a template, a ServiceAccount, a
// namespace that does not exist yet) and the combination of an instance
// and its template (a cluster-wide instance of a template with a
// ServiceAccount subject without a namespace).
//
// The checks are the controllers' own pure functions: binding.ValidateTemplate
// for a ScopeTemplate; binding.Selector and publish.Validate for a
// ScopeInstance; policy.ValidateSubjects and the selector for an RBACPolicy.
func SpecErrors(obj client.Object) []string {
	if msg := emptyWindow(obj); msg != "" {
		return []string{msg}
	}
	switch o := obj.(type) {
	case *oriav1alpha1.ScopeTemplate:
		if serr := binding.ValidateTemplate(o); serr != nil {
			return []string{invalidSpec("ScopeTemplate", o.Name, serr.Reason, serr.Message)}
		}
	case *oriav1alpha1.ScopeInstance:
		var out []string
		if _, serr := binding.Selector(o.Spec); serr != nil {
			out = append(out, invalidSpec("ScopeInstance", o.Name, serr.Reason, serr.Message))
		}
		if err := publish.Validate(o.Spec.Publication); err != nil {
			out = append(out, invalidSpec("ScopeInstance", o.Name, oriav1alpha1.ReasonInvalidSpec, err.Error()))
		}
		return out
	case *oriav1alpha1.RBACPolicy:
		var out []string
		for _, p := range policy.ValidateSubjects(o.Spec.Subjects) {
			out = append(out, invalidSpec("RBACPolicy", o.Name, oriav1alpha1.ReasonInvalidSubject, p))
		}
		// The same parse as the compiled ScopeInstance's: Compile copies
		// the selector into it.
		if _, serr := binding.Selector(oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: o.Spec.NamespaceSelector}); serr != nil {
			out = append(out, invalidSpec("RBACPolicy", o.Name, serr.Reason, serr.Message))
		}
		return out
	}
	return nil
}

// invalidSpec is the refusal of a spec error: what, where, and that it is
// refused for everyone.
func invalidSpec(kind, name, reason, msg string) string {
	return fmt.Sprintf("%s %q is not valid (%s): %s; oria could not apply it, so it is refused for every user, cluster admins included",
		kind, name, reason, msg)
}
