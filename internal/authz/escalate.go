package authz

import (
	"context"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/operator-framework/oria/internal/binding"
)

// The checks answered with SubjectAccessReviews alone (no rules in
// memory): Unrestricted, CheckBindEveryRole and CheckEscalate.

// Unrestricted reports whether user may bind and escalate every ClusterRole
// cluster-wide (cluster admins, and oria itself): such a user passes every
// check, so nothing else needs to be asked.
func (a *Authorizer) Unrestricted(ctx context.Context, user authenticationv1.UserInfo) (bool, error) {
	denied, err := a.Denied(ctx, user, []Permission{bindPermission("", ""), escalatePermission("")}, 1)
	return len(denied) == 0, err
}

// CheckBindEveryRole returns the places (grants with an empty Role) where user may
// not bind every ClusterRole: what binding roles that are not known yet
// needs.
func (a *Authorizer) CheckBindEveryRole(ctx context.Context, user authenticationv1.UserInfo, places []binding.Grant) ([]binding.Grant, error) {
	perms := make([]Permission, len(places))
	for i, p := range places {
		perms[i] = bindPermission("", p.Namespace)
	}
	denied, err := a.Denied(ctx, user, perms, orDefault(a.MaxDenials, DefaultMaxDenials))
	if err != nil {
		return nil, err
	}
	out := make([]binding.Grant, len(denied))
	for i, p := range denied {
		out[i] = binding.Grant{Namespace: p.Namespace}
	}
	return out, nil
}

// CheckEscalate returns the inline roles user may not create, at most
// MaxDenials: roles maps each role name to its rules.
func (a *Authorizer) CheckEscalate(ctx context.Context, user authenticationv1.UserInfo, roles map[string][]rbacv1.PolicyRule) ([]Denial, error) {
	names := make([]string, 0, len(roles))
	perms := make([]Permission, 0, len(roles))
	for name := range roles {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		perms = append(perms, escalatePermission(name))
	}
	noEscalate, err := a.Denied(ctx, user, perms, len(perms))
	if err != nil {
		return nil, err
	}
	var denials []Denial
	for _, p := range noEscalate {
		d, err := a.holds(ctx, user, "escalate", binding.Grant{Role: p.Name}, roles[p.Name])
		if err != nil {
			return nil, err
		}
		if d != nil {
			if denials = append(denials, *d); len(denials) >= orDefault(a.MaxDenials, DefaultMaxDenials) {
				break
			}
		}
	}
	return denials, nil
}
