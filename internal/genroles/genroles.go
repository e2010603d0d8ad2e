// Package genroles is the one definition of the ClusterRoles oria generates
// for the APIs of a ClusterExtension: their rules (Rules), the generated
// names of an extension's APIs (Of), and which ClusterRole found under one of
// those names oria may bind or aggregate (Classify).
//
// A name is not an identity: anyone who may create ClusterRoles can create
// one under a generated name before oria does (while the extension is
// Unmanaged, say), or edit one oria made. oria binds (for an RBACPolicy) and
// aggregates (in Legacy mode) only a role it made with exactly the rules it
// generates, or a bundle-provided role that stays within the extension's APIs
// (package bundlerole). Everything else under a generated name is withheld
// and reported.
//
// Everything here is pure: the extension controller generates with Rules,
// the role judge (package rolejudge) classifies what it reads with Classify.
package genroles

import (
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/bundlerole"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/ownership"
)

// Rules returns the policy rules of the role of kind k for the CRD named crd
// (design.md, "role rules").
func Rules(crd string, k names.RoleKind) []rbacv1.PolicyRule {
	plural, group := names.SplitCRDName(crd)
	rule := func(verbs ...string) []rbacv1.PolicyRule {
		return []rbacv1.PolicyRule{{APIGroups: []string{group}, Resources: []string{plural}, Verbs: verbs}}
	}
	switch k {
	case names.RoleAdmin:
		return rule(rbacv1.VerbAll)
	case names.RoleEdit:
		return rule("create", "update", "patch", "delete")
	case names.RoleView:
		return rule("get", "list", "watch")
	case names.RoleViewCRDView:
		return []rbacv1.PolicyRule{{
			APIGroups:     []string{apiextensionsv1.GroupName},
			Resources:     []string{"customresourcedefinitions"},
			ResourceNames: []string{crd},
			Verbs:         []string{"get"},
		}}
	}
	return nil
}

// Role is what a generated name stands for: the role of kind Kind for the
// CRD named CRD.
type Role struct {
	CRD  string
	Kind names.RoleKind
}

// Of returns the generated roles of the CRDs named crds, by role name.
func Of(crds []string) map[string]Role {
	out := make(map[string]Role, len(crds)*len(names.RoleKinds))
	for _, crd := range crds {
		for _, k := range names.RoleKinds {
			out[names.ExtensionRole(crd, k)] = Role{CRD: crd, Kind: k}
		}
	}
	return out
}

// Class is what the ClusterRole under a generated name is to oria, and so
// what oria may do with it.
type Class int

const (
	// Generated: oria made it for this extension (its controller reference
	// is the extension, with its UID) and its rules are exactly the
	// generated ones. Bound.
	Generated Class = iota
	// Bundle: installed by operator-controller for this extension, and its
	// rules stay within the extension's APIs. Bound.
	Bundle
	// Missing: no ClusterRole has the name (yet). Nothing is bound under it:
	// a role created there later by someone else must not inherit the grant.
	Missing
	// Drifted: oria's role (the extension controller's own classification,
	// ownership.ExtensionOwns), but not exactly as oria generates it (its
	// rules, an aggregationRule or its controller reference were changed).
	// The extension controller restores it; until then it is withheld.
	Drifted
	// TooBroad: a bundle role that reaches beyond the extension's APIs
	// (bundlerole.Beyond). Withheld until the bundle narrows it.
	TooBroad
	// Foreign: anything else (made by hand, by oria for another extension,
	// by another tool). Withheld, and reported as a conflict.
	Foreign
)

// Classification is the class of the role named Name, and why (empty for
// the classes that bind).
type Classification struct {
	Name  string
	Class Class
	Why   string
}

// Bindable reports whether oria may bind or aggregate the role.
func (c Classification) Bindable() bool { return c.Class == Generated || c.Class == Bundle }

// Extension identifies the ClusterExtension the roles belong to.
type Extension struct {
	Name string
	UID  types.UID
	// CRDs are the names of its CRDs ("<plural>.<group>").
	CRDs []string
}

// Classify tells what oria may do with cr, the ClusterRole found under the
// generated name of role r of extension ext (nil when there is none).
func Classify(cr *rbacv1.ClusterRole, r Role, ext Extension) Classification {
	if cr == nil || !cr.DeletionTimestamp.IsZero() {
		name := names.ExtensionRole(r.CRD, r.Kind)
		return Classification{Name: name, Class: Missing, Why: fmt.Sprintf(
			"ClusterRole %q does not exist (the ClusterExtension controller generates it for %s)", name, r.CRD)}
	}
	c := Classification{Name: cr.Name}
	if ownership.ExtensionOwns(cr, ext.Name, ext.UID) {
		var drift []string
		if !ownership.IsControlledBy(cr.OwnerReferences, ownership.ExtensionRef(ext.Name, ext.UID)) {
			drift = append(drift, fmt.Sprintf("its controller is not ClusterExtension %q with UID %s", ext.Name, ext.UID))
		}
		if cr.AggregationRule != nil {
			drift = append(drift, "it has an aggregationRule (its rules are computed from other roles)")
		}
		if want := Rules(r.CRD, r.Kind); !equality.Semantic.DeepEqual(cr.Rules, want) {
			drift = append(drift, fmt.Sprintf("its rules are %s instead of %s", formatRules(cr.Rules), formatRules(want)))
		}
		if len(drift) == 0 {
			c.Class = Generated
			return c
		}
		c.Class, c.Why = Drifted, fmt.Sprintf(
			"ClusterRole %q was generated by oria but changed since (%s); it is withheld until the ClusterExtension controller restores it",
			cr.Name, strings.Join(drift, "; "))
		return c
	}
	if ownership.IsBundleRole(cr, ext.Name) {
		if problems := bundlerole.Beyond(r.Kind, cr.Rules, ext.CRDs); len(problems) > 0 {
			c.Class, c.Why = TooBroad, bundlerole.Describe(cr.Name, problems)
			return c
		}
		c.Class = Bundle
		return c
	}
	c.Class = Foreign
	if ownership.IsManaged(cr) && cr.Labels[oriav1alpha1.LabelExtension] != names.LabelValue(ext.Name) {
		c.Why = fmt.Sprintf("ClusterRole %q was generated by oria for another extension (%s)", cr.Name, ownership.ExtensionOf(cr))
	} else {
		c.Why = fmt.Sprintf("ClusterRole %q exists and was neither created by oria for ClusterExtension %q nor installed by its bundle", cr.Name, ext.Name)
	}
	return c
}

// maxRulesInMessage bounds the rules a drift message quotes.
const maxRulesInMessage = 3

// formatRules renders rules compactly for a message.
func formatRules(rules []rbacv1.PolicyRule) string {
	if len(rules) == 0 {
		return "[]"
	}
	var parts []string
	for _, r := range rules[:min(len(rules), maxRulesInMessage)] {
		parts = append(parts, bundlerole.FormatRule(r))
	}
	if more := len(rules) - maxRulesInMessage; more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", more))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
