// Package authz is oria's one answer to "may this identity do, or grant,
// this, here": SubjectAccessReviews against the API server's own authorizer
// (Allowed, Denied), and Kubernetes' rule against privilege escalation for
// roles and bindings (CheckBind, CheckEachBind, CheckBindEveryRole, CheckEscalate),
// answered first from the identity's RBAC rules held in memory when there
// are some (RuleSource: CachedRules over package rbacrules, compared with
// Kubernetes' own Covers, answers remembered by content) and confirmed with
// SubjectAccessReviews for what those do not settle.
//
// Its users: the escalation guard (internal/admission) for the requester of
// a write, the ScopeInstance controller for a ServiceAccount ceiling (the
// new rules of a role its bindings grant), and the kubectl plugin
// (internal/cli) to confirm who may do what. Who an identity is (a
// ServiceAccount as a user) is package subjects'.
package authz

import (
	"context"
	"errors"
	"fmt"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/operator-framework/oria/internal/binding"
)

// Defaults of the Authorizer's limits.
const (
	// DefaultParallelism is the number of SubjectAccessReviews in flight for
	// one admission request.
	DefaultParallelism = 8
	// DefaultMaxMissing is how many missing permissions are looked for (and
	// named) per role before giving up on it.
	DefaultMaxMissing = 5
	// DefaultMaxDenials is how many refused grants are looked for (and
	// named) per request before refusing.
	DefaultMaxDenials = 3
	// DefaultMaxPermissions is the most permissions of one role checked one
	// by one; a role granting more can only be bound with "bind".
	DefaultMaxPermissions = 2000
)

// Authorizer answers, with SubjectAccessReviews against the API server's
// own authorizer, whether a user may create a role or a binding themselves,
// by Kubernetes' rule against privilege escalation:
//
//   - a binding to a ClusterRole in a namespace (or cluster-wide) needs
//     "bind" on that ClusterRole there, or every permission the role grants
//     there;
//   - a ClusterRole needs "escalate" on it, or every permission it grants,
//     cluster-wide.
//
// Make one with New.
type Authorizer struct {
	// client creates SubjectAccessReviews.
	client client.Client
	// rules reads a user's rules from memory (CachedRules, or NoRules).
	rules RuleSource
	// reader reads ClusterRoles (the API server, not a cache: oria caches
	// only the roles it generated).
	reader client.Reader

	// Limits; the Default* constants when 0.
	Parallelism    int
	MaxMissing     int
	MaxDenials     int
	MaxPermissions int

	// covers remembers what rules cover across requests.
	covers coversMemo
}

// New returns an Authorizer that creates SubjectAccessReviews with c, reads
// ClusterRoles with reader and users' rules from rules (NoRules asks
// SubjectAccessReviews for everything). Each is required.
func New(c client.Client, reader client.Reader, rules RuleSource) (*Authorizer, error) {
	if c == nil || reader == nil || rules == nil {
		return nil, errors.New("authz.New: a client, a reader and a rule source are required")
	}
	return &Authorizer{client: c, reader: reader, rules: rules}, nil
}

func (a *Authorizer) parallelism() int { return orDefault(a.Parallelism, DefaultParallelism) }

func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// Allowed asks whether user holds p.
func (a *Authorizer) Allowed(ctx context.Context, user authenticationv1.UserInfo, p Permission) (bool, error) {
	return Ask(ctx, a.client, user, p)
}

// Ask asks the API server with one SubjectAccessReview, created with c,
// whether user holds p.
func Ask(ctx context.Context, c client.Client, user authenticationv1.UserInfo, p Permission) (bool, error) {
	sar := SubjectAccessReview(user, p)
	if err := c.Create(ctx, sar); err != nil {
		return false, fmt.Errorf("SubjectAccessReview for %s: %w", p, err)
	}
	return sar.Status.Allowed, nil
}

// Unrestricted reports whether user may bind and escalate every ClusterRole
// cluster-wide (cluster admins, and oria itself): such a user passes every
// check, so nothing else needs to be asked.
func (a *Authorizer) Unrestricted(ctx context.Context, user authenticationv1.UserInfo) (bool, error) {
	denied, err := a.Denied(ctx, user, []Permission{bindPermission("", ""), escalatePermission("")}, 1)
	return len(denied) == 0, err
}

// CheckBind returns the grants user may not create, at most MaxDenials.
// inline holds the rules of roles oria writes itself (a template's inline
// roles: what the role will grant once oria writes it); every other role is
// read from the API server.
//
// A role bindable cluster-wide is settled by one review for all its
// namespaces; every other grant is answered from the user's rules where it
// binds (CachedRules: the cluster's RBAC objects held in memory); what
// those cannot settle (a grant the rules do not cover, no RuleSource) is
// asked with SubjectAccessReviews.
func (a *Authorizer) CheckBind(ctx context.Context, user authenticationv1.UserInfo, grants []binding.Grant, inline map[string][]rbacv1.PolicyRule) ([]Denial, error) {
	return a.checkBind(ctx, user, grants, inline, orDefault(a.MaxDenials, DefaultMaxDenials))
}

// CheckEachBind is CheckBind returning every grant user may not create, not
// only the first MaxDenials: for a caller that decides each grant (the
// ServiceAccount ceiling), not one that explains a refusal.
func (a *Authorizer) CheckEachBind(ctx context.Context, user authenticationv1.UserInfo, grants []binding.Grant, inline map[string][]rbacv1.PolicyRule) ([]Denial, error) {
	return a.checkBind(ctx, user, grants, inline, max(len(grants), 1))
}

func (a *Authorizer) checkBind(ctx context.Context, user authenticationv1.UserInfo, grants []binding.Grant, inline map[string][]rbacv1.PolicyRule, maxDenials int) ([]Denial, error) {
	// The roles are read while the cluster-wide reviews are made: two
	// round trips at once instead of one after the other.
	roles := &roleRules{a: a, inline: inline, read: map[string]*rbacv1.ClusterRole{}}
	prefetched := make(chan error, 1)
	go func() { prefetched <- roles.prefetch(ctx, grants) }()
	boundEverywhere, err := a.bindableEverywhere(ctx, user, grants)
	if perr := <-prefetched; err == nil {
		err = perr
	}
	if err != nil {
		return nil, err
	}
	var todo []binding.Grant
	seen := map[string]bool{}
	var namespaces []string
	for _, g := range grants {
		if boundEverywhere[g.Role] {
			continue
		}
		todo = append(todo, g)
		if !seen[g.Namespace] {
			seen[g.Namespace] = true
			namespaces = append(namespaces, g.Namespace)
		}
	}
	u, err := a.rulesIn(ctx, user, namespaces)
	if err != nil {
		// Reviews answer the same question, more slowly.
		log.FromContext(ctx).Info("reading the user's rules failed; asking SubjectAccessReviews instead", "user", user.Username, "error", err.Error())
		u = nil
	}
	var rest []binding.Grant
	for _, g := range todo {
		if u != nil {
			role, err := roles.of(ctx, g.Role)
			if err != nil {
				return nil, err
			}
			if u.allows(g, role.rules, role.onlyBind()) {
				continue
			}
		}
		rest = append(rest, g)
	}
	return a.checkBindReviews(ctx, user, rest, roles, maxDenials)
}

// bindableEverywhere returns the roles of grants bound in more than one
// namespace that user may bind cluster-wide: one review then answers for
// every namespace (a cluster-wide "bind" holds in each of them), which keeps
// an instance listing many namespaces cheap to check.
func (a *Authorizer) bindableEverywhere(ctx context.Context, user authenticationv1.UserInfo, grants []binding.Grant) (map[string]bool, error) {
	namespaces := map[string]int{}
	for _, g := range grants {
		if !g.ClusterWide() {
			namespaces[g.Role]++
		}
	}
	var perms []Permission
	for role, n := range namespaces {
		if n > 1 {
			perms = append(perms, bindPermission(role, ""))
		}
	}
	if len(perms) == 0 {
		return nil, nil
	}
	denied, err := a.Denied(ctx, user, perms, len(perms))
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(perms))
	for _, p := range perms {
		out[p.Name] = !slices.Contains(denied, p)
	}
	return out, nil
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

// holds returns nil when user holds every permission rules grant where g
// binds, else the denial naming what is missing.
func (a *Authorizer) holds(ctx context.Context, user authenticationv1.UserInfo, verb string, g binding.Grant, rules []rbacv1.PolicyRule) (*Denial, error) {
	perms := Expand(rules, g.Namespace)
	if len(perms) > orDefault(a.MaxPermissions, DefaultMaxPermissions) {
		return &Denial{Verb: verb, Grant: g, TooLarge: true}, nil
	}
	limit := orDefault(a.MaxMissing, DefaultMaxMissing)
	missing, err := a.Denied(ctx, user, perms, limit)
	if err != nil || len(missing) == 0 {
		return nil, err
	}
	return &Denial{Verb: verb, Grant: g, Missing: missing, More: len(missing) >= limit}, nil
}
