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
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
)

// Lister reads RBAC objects. A missing role is (nil, nil): a binding to it
// grants nothing, as in the API server's authorizer.
type Lister interface {
	ClusterRoleBindings() ([]*rbacv1.ClusterRoleBinding, error)
	RoleBindings(namespace string) ([]*rbacv1.RoleBinding, error)
	ClusterRole(name string) (*rbacv1.ClusterRole, error)
	Role(namespace, name string) (*rbacv1.Role, error)
}

// User is who is asked about: RBAC looks at the name and the groups only.
type User struct {
	Name   string
	Groups []string
}

// For returns the rules user holds in namespace ("": cluster-wide, the
// rules of their ClusterRoleBindings only). The rules of a role are
// shared with the lister's object: callers must not change them.
func For(l Lister, user User, namespace string) ([]rbacv1.PolicyRule, error) {
	crbs, err := l.ClusterRoleBindings()
	if err != nil {
		return nil, fmt.Errorf("listing ClusterRoleBindings: %w", err)
	}
	var rules []rbacv1.PolicyRule
	for _, b := range crbs {
		if !appliesTo(user, b.Subjects, "") || b.RoleRef.Kind != "ClusterRole" {
			continue
		}
		r, err := l.ClusterRole(b.RoleRef.Name)
		if err != nil {
			return nil, fmt.Errorf("reading ClusterRole %q: %w", b.RoleRef.Name, err)
		}
		if r != nil {
			rules = append(rules, r.Rules...)
		}
	}
	if namespace == "" {
		return rules, nil
	}
	rbs, err := l.RoleBindings(namespace)
	if err != nil {
		return nil, fmt.Errorf("listing the RoleBindings of namespace %q: %w", namespace, err)
	}
	for _, b := range rbs {
		if !appliesTo(user, b.Subjects, namespace) {
			continue
		}
		more, err := roleRules(l, b.RoleRef, namespace)
		if err != nil {
			return nil, err
		}
		rules = append(rules, more...)
	}
	return rules, nil
}

// roleRules are the rules of the role a RoleBinding in namespace refers to.
func roleRules(l Lister, ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	switch ref.Kind {
	case "ClusterRole":
		r, err := l.ClusterRole(ref.Name)
		if err != nil || r == nil {
			return nil, wrap(err, "ClusterRole", ref.Name)
		}
		return r.Rules, nil
	case "Role":
		r, err := l.Role(namespace, ref.Name)
		if err != nil || r == nil {
			return nil, wrap(err, "Role "+namespace+"/", ref.Name)
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
func appliesTo(user User, subjects []rbacv1.Subject, namespace string) bool {
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			if s.Name == user.Name {
				return true
			}
		case rbacv1.GroupKind:
			if slices.Contains(user.Groups, s.Name) {
				return true
			}
		case rbacv1.ServiceAccountKind:
			ns := s.Namespace
			if ns == "" {
				ns = namespace
			}
			if ns != "" && user.Name == "system:serviceaccount:"+ns+":"+s.Name {
				return true
			}
		}
	}
	return false
}
