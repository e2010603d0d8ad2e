// Package bundlerole decides whether a ClusterRole that an extension's
// bundle provides under one of oria's generated names stays within the
// extension's own APIs. oria uses such a role instead of generating its own:
// in Legacy mode it aggregates it into the built-in admin, edit or view
// ClusterRole, in FineGrained mode RBACPolicy objects bind it. A bundle role
// whose rules reach further (secrets, another group, a wildcard, a
// non-resource URL) would hand that extra access to everyone holding the
// built-in role, or to every subject of a policy; oria grants such a role
// nowhere and reports it instead.
//
// Everything here is pure: the extension controller and the RBACPolicy
// controller call it with the rules they read.
package bundlerole

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/ownership"
)

// crdResource is the resource of CustomResourceDefinitions.
const crdResource = "customresourcedefinitions"

// readVerbs are the verbs a role may hold on the extension's own
// CustomResourceDefinitions: the generated -view-crdview role holds get;
// list and watch restricted to resourceNames reveal nothing more.
var readVerbs = []string{"get", "list", "watch"}

// MaxProblemsInMessage bounds the offending rules a message quotes.
const MaxProblemsInMessage = 3

// Beyond returns how the rules of a bundle-provided role of kind k reach
// beyond the APIs of the extension whose CRDs are named crds
// ("<plural>.<group>"): one human-readable sentence per offending rule, in
// rule order; nil when the role stays within the extension.
//
// Within means:
//   - admin, edit, view: every (API group, resource) the rules name is one of
//     the extension's CRDs, or a subresource of one ("<plural>/status",
//     "<plural>/scale"), with any verbs and any resourceNames; reading the
//     extension's own CustomResourceDefinitions by name (as -view-crdview
//     does) is within too;
//   - view-crdview: only get, list or watch on
//     apiextensions.k8s.io/customresourcedefinitions, with resourceNames,
//     each the name of one of the extension's CRDs.
//
// Beyond is anything else: another group or resource, "*" as a group or a
// resource (also "*/<subresource>"), non-resource URLs, write verbs on
// CustomResourceDefinitions, CustomResourceDefinitions without
// resourceNames or of another extension.
func Beyond(k names.RoleKind, rules []rbacv1.PolicyRule, crds []string) []string {
	own := map[[2]string]bool{}
	for _, crd := range crds {
		plural, group := names.SplitCRDName(crd)
		own[[2]string{group, plural}] = true
	}
	var out []string
	for i, rule := range rules {
		if reasons := ruleBeyond(k, rule, own, crds); len(reasons) > 0 {
			out = append(out, fmt.Sprintf("rule %d %s: %s", i+1, FormatRule(rule), strings.Join(reasons, "; ")))
		}
	}
	return out
}

// ruleBeyond returns, deduplicated and in the order found, why one rule
// reaches beyond the extension (own: its (group, plural) pairs).
func ruleBeyond(k names.RoleKind, rule rbacv1.PolicyRule, own map[[2]string]bool, crds []string) []string {
	var reasons []string
	add := func(format string, args ...any) {
		if s := fmt.Sprintf(format, args...); !slices.Contains(reasons, s) {
			reasons = append(reasons, s)
		}
	}
	if len(rule.NonResourceURLs) > 0 {
		add("grants non-resource URLs %s", quoted(rule.NonResourceURLs))
	}
	if slices.Contains(rule.APIGroups, rbacv1.APIGroupAll) && len(rule.Resources) > 0 {
		add(`grants resources of every API group ("*")`)
	}
	readsCRDs := false
	for _, res := range rule.Resources {
		base, sub, _ := strings.Cut(res, "/")
		if base == rbacv1.ResourceAll {
			if sub == "" {
				add(`grants every resource ("*")`)
			} else {
				add("grants subresource %q of every resource (%q)", sub, res)
			}
			continue
		}
		for _, group := range rule.APIGroups {
			switch {
			case group == rbacv1.APIGroupAll:
				// Reported once above.
			case group == apiextensionsv1.GroupName && base == crdResource:
				readsCRDs = true
			case k == names.RoleViewCRDView:
				add("grants %s, but a %s role may only read the extension's CustomResourceDefinitions", describe(group, res), names.RoleViewCRDView)
			case !own[[2]string{group, base}]:
				add("grants %s, which is not an API of the extension", describe(group, res))
			}
		}
	}
	if readsCRDs {
		for _, r := range crdReadBeyond(rule, crds) {
			add("%s", r)
		}
	}
	return reasons
}

// crdReadBeyond returns why a rule naming CustomResourceDefinitions reaches
// beyond reading the extension's own.
func crdReadBeyond(rule rbacv1.PolicyRule, crds []string) []string {
	var reasons []string
	var writes []string
	for _, v := range rule.Verbs {
		if !slices.Contains(readVerbs, v) {
			writes = append(writes, v)
		}
	}
	if len(writes) > 0 {
		reasons = append(reasons, fmt.Sprintf("grants verbs %s on CustomResourceDefinitions (only get, list and watch are within)", quoted(writes)))
	}
	if len(rule.ResourceNames) == 0 {
		reasons = append(reasons, "grants CustomResourceDefinitions without resourceNames (every CustomResourceDefinition of the cluster)")
	}
	for _, n := range rule.ResourceNames {
		if !slices.Contains(crds, n) {
			reasons = append(reasons, fmt.Sprintf("grants CustomResourceDefinition %q, which is not one of the extension's", n))
		}
	}
	return reasons
}

// describe names a resource of an API group for a message.
func describe(group, resource string) string {
	if group == "" {
		return fmt.Sprintf("resource %q of the core API group", resource)
	}
	return fmt.Sprintf("resource %q of API group %q", resource, group)
}

// FormatRule renders a policy rule compactly for a message, e.g.
// {apiGroups: [""], resources: ["secrets"], verbs: ["get", "list"]}.
func FormatRule(r rbacv1.PolicyRule) string {
	var parts []string
	for _, f := range []struct {
		name   string
		values []string
	}{
		{"apiGroups", r.APIGroups}, {"resources", r.Resources}, {"resourceNames", r.ResourceNames},
		{"nonResourceURLs", r.NonResourceURLs}, {"verbs", r.Verbs},
	} {
		if len(f.values) > 0 {
			parts = append(parts, f.name+": "+quoted(f.values))
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func quoted(values []string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = fmt.Sprintf("%q", v)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// Describe is the sentence that reports the bundle-provided ClusterRole
// named name with the problems Beyond found, quoting at most
// MaxProblemsInMessage of them.
func Describe(name string, problems []string) string {
	shown := problems[:min(len(problems), MaxProblemsInMessage)]
	s := fmt.Sprintf("bundle-provided ClusterRole %q reaches beyond the extension's own APIs: %s", name, strings.Join(shown, "; "))
	if more := len(problems) - len(shown); more > 0 {
		s += fmt.Sprintf(" (and %d more rule(s))", more)
	}
	return s
}

// TooBroad returns, by role name, the bundle-provided roles among roles that
// must not be granted, each with the sentence (Describe) that says why.
// roles may be any ClusterRoles (for instance every ClusterRole labelled as
// installed for the extension); only those that are live, installed by
// operator-controller for the ClusterExtension named extension
// (ownership.IsBundleRole) and named like one of the generated roles of
// crds (the extension's CRD names) are judged, each against the role kind
// its name gives. A role absent from the result is either within the
// extension or not a bundle role of it.
func TooBroad(extension string, crds []string, roles []rbacv1.ClusterRole) map[string]string {
	kinds := names.ExtensionRoleKinds(crds)
	out := map[string]string{}
	for i := range roles {
		cr := &roles[i]
		k, ok := kinds[cr.Name]
		if !ok || !cr.DeletionTimestamp.IsZero() || !ownership.IsBundleRole(cr, extension) {
			continue
		}
		if problems := Beyond(k, cr.Rules, crds); len(problems) > 0 {
			out[cr.Name] = Describe(cr.Name, problems)
		}
	}
	return out
}
