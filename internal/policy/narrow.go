package policy

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/subjects"
)

// Narrowed is what a policy that cannot be compiled as it stands keeps of
// the grant in force.
type Narrowed struct {
	// Template and Instance are the compiled objects to keep; both nil when
	// nothing is kept (the grant in force is removed).
	Template *oriav1alpha1.ScopeTemplate
	Instance *oriav1alpha1.ScopeInstance
	// Removed says what of the grant in force the current spec no longer
	// allows (roles, then subjects, then the target), for a message.
	Removed []string
}

// Narrow returns what a policy keeps while its current spec cannot be
// applied (an unusable subject, a selector that does not parse, an extension
// whose mode annotation is invalid): at most what the grant in force gives
// (tmpl and inst, its compiled objects as they are; nil when absent) and
// what the current spec still allows, never more. An admin's narrowing
// always lands; nothing the spec adds is granted until it is valid.
//
//   - Roles: those of tmpl that are among roles (the ClusterRoles the current
//     spec binds: Compile's Roles, less those withheld).
//   - Subjects: those of tmpl that the current spec still names and that are
//     usable (ValidateSubjects finds nothing wrong with them alone).
//   - Target: the namespaces both inst and the spec reach. A cluster-wide
//     spec keeps inst's target; a cluster-wide inst takes the spec's (its
//     selector only when it parses). Two lists give the namespaces in both;
//     two selectors give one selector with the requirements of both. A list
//     against a selector cannot be decided without the namespaces' labels:
//     nothing is kept of it.
//   - ServiceAccount (the ceiling): inst's when the spec names none or the
//     same one; the spec's when inst had none (a ceiling only takes away);
//     two different ones cannot be compared: nothing is kept.
//   - Window (notBefore, expiresAt): the time both inst's and the spec's
//     allow (binding.Intersect), so an expiry lands whatever else is wrong.
//
// When no role, no subject or no namespace is left, nothing is kept.
func Narrow(policy *oriav1alpha1.RBACPolicy, roles []string, tmpl *oriav1alpha1.ScopeTemplate, inst *oriav1alpha1.ScopeInstance) Narrowed {
	if tmpl == nil || inst == nil {
		return Narrowed{}
	}
	var n Narrowed
	var keptRoles []oriav1alpha1.ClusterRoleTemplate
	for _, r := range tmpl.Spec.ClusterRoles {
		if r.Name != "" && r.GenerateName == "" && len(r.Rules) == 0 && slices.Contains(roles, r.Name) {
			keptRoles = append(keptRoles, oriav1alpha1.ClusterRoleTemplate{Name: r.Name})
		} else {
			n.Removed = append(n.Removed, fmt.Sprintf("ClusterRole %q", cmp.Or(r.Name, r.GenerateName)))
		}
	}
	allowed := usableSubjects(policy.Spec.Subjects)
	var keptSubjects []rbacv1.Subject
	for _, s := range tmpl.Spec.BindingTemplate.Subjects {
		if slices.Contains(allowed, s) && !slices.Contains(keptSubjects, s) {
			keptSubjects = append(keptSubjects, s)
		} else {
			n.Removed = append(n.Removed, "subject "+describeSubject(s))
		}
	}
	target, ok, removed := narrowTarget(inst.Spec, policy.Spec)
	n.Removed = append(n.Removed, removed...)
	// The window in force, cut to the spec's: a window the admin narrows
	// (an earlier expiresAt) lands, one they widen waits for a valid spec.
	window := binding.Intersect(binding.InstanceWindow(inst.Spec), binding.PolicyWindow(policy.Spec).Whole())
	target.NotBefore, target.ExpiresAt = window.NotBefore, window.ExpiresAt
	if !ok || len(keptRoles) == 0 || len(keptSubjects) == 0 {
		return n
	}
	meta := compiledMeta(policy)
	n.Template = &oriav1alpha1.ScopeTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: oriav1alpha1.GroupVersion.String(), Kind: ownership.KindScopeTemplate},
		ObjectMeta: *meta.DeepCopy(),
		Spec: oriav1alpha1.ScopeTemplateSpec{
			ClusterRoles:    keptRoles,
			BindingTemplate: oriav1alpha1.BindingTemplate{Subjects: keptSubjects},
		},
	}
	target.ScopeTemplateName = meta.Name
	n.Instance = &oriav1alpha1.ScopeInstance{
		TypeMeta:   metav1.TypeMeta{APIVersion: oriav1alpha1.GroupVersion.String(), Kind: ownership.KindScopeInstance},
		ObjectMeta: meta,
		Spec:       target,
	}
	return n
}

// usableSubjects returns, normalized as Compile writes them, the subjects
// that ValidateSubjects accepts on their own.
func usableSubjects(in []rbacv1.Subject) []rbacv1.Subject {
	var ok []rbacv1.Subject
	for _, s := range in {
		if len(ValidateSubjects([]rbacv1.Subject{s})) == 0 {
			ok = append(ok, s)
		}
	}
	return subjects.Normalize(ok, "")
}

// narrowTarget returns the instance spec (without its template name) that
// reaches only where both cur and the policy spec reach, whether anything is
// left, and what of cur it drops.
func narrowTarget(cur oriav1alpha1.ScopeInstanceSpec, spec oriav1alpha1.RBACPolicySpec) (oriav1alpha1.ScopeInstanceSpec, bool, []string) {
	var out oriav1alpha1.ScopeInstanceSpec
	var removed []string
	switch {
	case cur.ServiceAccount == nil && spec.ServiceAccount != nil:
		out.ServiceAccount = spec.ServiceAccount.DeepCopy()
	case spec.ServiceAccount == nil || *spec.ServiceAccount == *cur.ServiceAccount:
		out.ServiceAccount = cur.ServiceAccount.DeepCopy()
	default:
		return out, false, []string{fmt.Sprintf("everything granted through ServiceAccount %s/%s (spec.serviceAccount names another one)",
			cur.ServiceAccount.Namespace, cur.ServiceAccount.Name)}
	}
	var specSel *metav1.LabelSelector
	if spec.NamespaceSelector != nil {
		if _, err := metav1.LabelSelectorAsSelector(spec.NamespaceSelector); err == nil {
			specSel = spec.NamespaceSelector
		}
	}
	curCluster := len(cur.Namespaces) == 0 && cur.NamespaceSelector == nil
	specCluster := len(spec.Namespaces) == 0 && spec.NamespaceSelector == nil
	switch {
	case specCluster:
		out.Namespaces, out.NamespaceSelector = slices.Clone(cur.Namespaces), cur.NamespaceSelector.DeepCopy()
		return out, true, nil
	case curCluster:
		out.Namespaces = slices.Compact(slices.Sorted(slices.Values(spec.Namespaces)))
		out.NamespaceSelector = specSel.DeepCopy()
		removed = append(removed, "the cluster-wide grant (the spec names namespaces)")
	default:
		for _, ns := range cur.Namespaces {
			if slices.Contains(spec.Namespaces, ns) {
				out.Namespaces = append(out.Namespaces, ns)
			} else {
				removed = append(removed, fmt.Sprintf("namespace %q", ns))
			}
		}
		if cur.NamespaceSelector != nil {
			if specSel != nil {
				out.NamespaceSelector = AndSelectors(cur.NamespaceSelector, specSel)
			}
			if !equality.Semantic.DeepEqual(out.NamespaceSelector, cur.NamespaceSelector) {
				removed = append(removed, fmt.Sprintf("namespaces selected by %s unless the current selector selects them too", describeSelector(cur.NamespaceSelector)))
			}
		}
	}
	return out, len(out.Namespaces) > 0 || out.NamespaceSelector != nil, removed
}

// AndSelectors returns a selector that matches exactly the namespaces both a
// and b match: their requirements together, a's first, each once. A key
// both match on with different values becomes an In requirement (which,
// with the other, matches nothing). And-ing the result with b again gives
// the result, so a narrowed selector stays as it is.
func AndSelectors(a, b *metav1.LabelSelector) *metav1.LabelSelector {
	out := a.DeepCopy()
	for _, k := range slices.Sorted(maps.Keys(b.MatchLabels)) {
		v := b.MatchLabels[k]
		switch cur, ok := out.MatchLabels[k]; {
		case !ok:
			if out.MatchLabels == nil {
				out.MatchLabels = map[string]string{}
			}
			out.MatchLabels[k] = v
		case cur != v:
			req := metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}}
			if !slices.ContainsFunc(out.MatchExpressions, func(r metav1.LabelSelectorRequirement) bool { return equality.Semantic.DeepEqual(r, req) }) {
				out.MatchExpressions = append(out.MatchExpressions, req)
			}
		}
	}
	for _, req := range b.MatchExpressions {
		if !slices.ContainsFunc(out.MatchExpressions, func(r metav1.LabelSelectorRequirement) bool { return equality.Semantic.DeepEqual(r, req) }) {
			out.MatchExpressions = append(out.MatchExpressions, *req.DeepCopy())
		}
	}
	return out
}

func describeSelector(s *metav1.LabelSelector) string {
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return "an invalid selector"
	}
	return fmt.Sprintf("%q", sel.String())
}

func describeSubject(s rbacv1.Subject) string {
	if s.Namespace != "" {
		return fmt.Sprintf("%s %s/%s", s.Kind, s.Namespace, s.Name)
	}
	return fmt.Sprintf("%s %s", s.Kind, s.Name)
}
