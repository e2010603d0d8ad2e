// Package rbacrules answers "which RBAC rules does this user hold in this
// namespace" from RBAC objects held in memory, as the API server's RBAC
// authorizer does from its own informers: the rules of every
// ClusterRoleBinding whose subjects match the user, and in a namespace also
// those of the RoleBindings there. The escalation guard compares them with
// what a write would grant (rbacvalidation.Covers); reading them from a
// cache instead of one SelfSubjectRulesReview per namespace keeps a check of
// an instance over many namespaces to one pass over the user's
// ClusterRoleBindings and one over each namespace's RoleBindings, all in
// process.
//
// Only RBAC is seen: another authorizer (a webhook, the Node authorizer) may
// allow more. A caller must treat the rules as incomplete, and confirm with
// SubjectAccessReviews what they do not cover.
package rbacrules

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/operator-framework/oria/internal/subjects"
)

// Lister reads RBAC objects. A missing role is (nil, nil): a binding to it
// grants nothing, as in the API server's authorizer.
type Lister interface {
	ClusterRoleBindings() ([]*rbacv1.ClusterRoleBinding, error)
	RoleBindings(namespace string) ([]*rbacv1.RoleBinding, error)
	ClusterRole(name string) (*rbacv1.ClusterRole, error)
	Role(namespace, name string) (*rbacv1.Role, error)
}

// Holding is what a user holds in one place: the roles bound to them
// there, by ClusterRoleBindings and (in a namespace) RoleBindings, sorted,
// each once. Equal holdings grant equal rules: a user who is admin of 100
// namespaces has the same holding in each.
type Holding struct {
	namespace string
	refs      []roleRef
}

// roleRef is a binding's role: a ClusterRole, or a Role of the binding's
// namespace.
type roleRef struct{ kind, name string }

// Key identifies the rules of h: equal keys, equal rules (a Role is named
// with its namespace).
func (h Holding) Key() string {
	var b strings.Builder
	for _, r := range h.refs {
		b.WriteString(r.kind)
		if r.kind == "Role" {
			b.WriteString(" " + h.namespace + "/")
		}
		b.WriteString(" " + r.name + "\x00")
	}
	return b.String()
}

// Rules returns the rules of h's roles, in a stable order. They are shared
// with the lister's objects: callers must not change them.
func (h Holding) Rules(l Lister) ([]rbacv1.PolicyRule, error) {
	var rules []rbacv1.PolicyRule
	for _, ref := range h.refs {
		more, err := roleRules(l, ref, h.namespace)
		if err != nil {
			return nil, err
		}
		rules = append(rules, more...)
	}
	return rules, nil
}

// Holdings returns what user holds in each of namespaces ("": cluster-wide,
// their ClusterRoleBindings only), with one pass over the
// ClusterRoleBindings and one over each namespace's RoleBindings.
func Holdings(l Lister, user subjects.Identity, namespaces []string) (map[string]Holding, error) {
	crbs, err := l.ClusterRoleBindings()
	if err != nil {
		return nil, fmt.Errorf("listing ClusterRoleBindings: %w", err)
	}
	var cluster []roleRef
	for _, b := range crbs {
		if b.RoleRef.Kind == "ClusterRole" && appliesTo(user, b.Subjects, "") {
			cluster = append(cluster, roleRef{kind: b.RoleRef.Kind, name: b.RoleRef.Name})
		}
	}
	out := make(map[string]Holding, len(namespaces))
	for _, ns := range namespaces {
		refs := slices.Clone(cluster)
		if ns != "" {
			rbs, err := l.RoleBindings(ns)
			if err != nil {
				return nil, fmt.Errorf("listing the RoleBindings of namespace %q: %w", ns, err)
			}
			for _, b := range rbs {
				if appliesTo(user, b.Subjects, ns) {
					refs = append(refs, roleRef{kind: b.RoleRef.Kind, name: b.RoleRef.Name})
				}
			}
		}
		slices.SortFunc(refs, func(a, b roleRef) int { return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.name, b.name)) })
		out[ns] = Holding{namespace: ns, refs: slices.Compact(refs)}
	}
	return out, nil
}

// roleRules are the rules of the role a RoleBinding in namespace refers to.
func roleRules(l Lister, ref roleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	switch ref.kind {
	case "ClusterRole":
		r, err := l.ClusterRole(ref.name)
		if err != nil || r == nil {
			return nil, wrap(err, "ClusterRole ", ref.name)
		}
		return r.Rules, nil
	case "Role":
		r, err := l.Role(namespace, ref.name)
		if err != nil || r == nil {
			return nil, wrap(err, "Role "+namespace+"/", ref.name)
		}
		return r.Rules, nil
	}
	return nil, nil
}

func wrap(err error, what, name string) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("reading %s%q: %w", what, name, err)
}

// appliesTo reports whether one of subjects is user, in a binding of
// namespace ("" for a ClusterRoleBinding). A ServiceAccount subject without
// a namespace is the ServiceAccount of that name in the binding's
// namespace; in a ClusterRoleBinding it matches nobody.
func appliesTo(user subjects.Identity, in []rbacv1.Subject, namespace string) bool {
	for _, s := range in {
		if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == "" {
			s.Namespace = namespace
		}
		if user.Names(s) {
			return true
		}
	}
	return false
}
