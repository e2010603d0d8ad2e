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
//
// CheckBind reads down its files: this one from CheckBind to the rules in
// memory (checkBind, the roles read ahead, the cluster-wide shortcut,
// rulesIn, allows, cover), reviews.go for the SubjectAccessReviews (Denied)
// and what they settle last (checkBindReviews, holds), covers.go for the
// answers remembered by content. escalate.go holds the checks made with
// reviews alone, rules.go where the rules in memory come from, denial.go
// the refusal's words.
package authz

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/ownership"
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

// checkBind is CheckBind naming at most maxDenials: the roles are read
// ahead, roles bindable cluster-wide settled by one review each, the rest
// answered from the user's rules in memory, and what those leave asked
// with SubjectAccessReviews (checkBindReviews).
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
			if u.allows(g, role) {
				continue
			}
		}
		rest = append(rest, g)
	}
	return a.checkBindReviews(ctx, user, rest, roles, maxDenials)
}

// roleRules reads the rules of the roles a check binds, once each: inline
// roles from the template, others from the API server.
type roleRules struct {
	a      *Authorizer
	inline map[string][]rbacv1.PolicyRule
	read   map[string]*rbacv1.ClusterRole
}

// prefetch reads the roles grants bind that are not inline, in parallel.
func (r *roleRules) prefetch(ctx context.Context, grants []binding.Grant) error {
	var names []string
	for _, g := range grants {
		if _, inline := r.inline[g.Role]; !inline && !slices.Contains(names, g.Role) {
			names = append(names, g.Role)
		}
	}
	read := make([]*rbacv1.ClusterRole, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	tokens := make(chan struct{}, r.a.parallelism())
	for i, name := range names {
		tokens <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-tokens; wg.Done() }()
			cr := &rbacv1.ClusterRole{}
			if err := r.a.reader.Get(ctx, client.ObjectKey{Name: name}, cr); err != nil {
				if !apierrors.IsNotFound(err) {
					errs[i] = fmt.Errorf("reading ClusterRole %q: %w", name, err)
				}
				cr = nil
			}
			read[i] = cr
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i, name := range names {
		r.read[name] = read[i]
	}
	return nil
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

// userRules are the rules of one user in each namespace of a check.
type userRules struct {
	sets map[string]RuleSet
	// memo holds what was worked out per distinct rule set and role.
	memo map[coverage]coverResult
	// digests are the digests of the rule sets, by key, for the answers
	// shared across requests (the Authorizer's).
	digests map[string]digest
	shared  *coversMemo
}

// coverage is one question to rbacvalidation.Covers.
type coverage struct {
	rules, role string
	clusterWide bool
}

type coverResult struct {
	bind    bool
	covered bool
}

// rulesIn reads the rules of user in namespaces; nil when the RuleSource
// holds none (NoRules).
func (a *Authorizer) rulesIn(ctx context.Context, user authenticationv1.UserInfo, namespaces []string) (*userRules, error) {
	if len(namespaces) == 0 {
		return nil, nil
	}
	sets, err := a.rules.RulesIn(ctx, user, namespaces)
	if err != nil || sets == nil {
		return nil, err
	}
	return &userRules{sets: sets, memo: map[coverage]coverResult{}, digests: map[string]digest{}, shared: &a.covers}, nil
}

// of returns what is known of role: its rules, absent when it does not
// exist, and inlineOf when it is another template's inline role.
func (r *roleRules) of(ctx context.Context, role string) (boundRole, error) {
	if rules, ok := r.inline[role]; ok {
		return boundRole{rules: rules}, nil
	}
	cr, found := r.read[role]
	if !found {
		cr = &rbacv1.ClusterRole{}
		if err := r.a.reader.Get(ctx, client.ObjectKey{Name: role}, cr); err != nil {
			if !apierrors.IsNotFound(err) {
				return boundRole{}, fmt.Errorf("reading ClusterRole %q: %w", role, err)
			}
			cr = nil
		}
		r.read[role] = cr
	}
	if cr == nil {
		return boundRole{absent: true}, nil
	}
	return boundRole{rules: cr.Rules, inlineOf: ownership.InlineRoleOf(cr)}, nil
}

// allows answers a grant from the user's rules where it binds, as
// Kubernetes' own escalation check does (rbacvalidation.Covers): allowed
// with "bind" on the role there, or when the rules cover every rule of the
// role (which must exist and not be another template's inline role:
// onlyBind). false means only that the rules do not settle it:
// SubjectAccessReviews must.
func (u *userRules) allows(g binding.Grant, role boundRole) bool {
	c := u.cover(g, role.rules)
	return c.bind || (!role.onlyBind() && c.covered)
}

// cover compares the user's rules where g binds with "bind" on g's role and
// with the role's rules (less non-resource URLs in a namespace: a
// RoleBinding grants none), once per distinct rule set and role.
func (u *userRules) cover(g binding.Grant, rules []rbacv1.PolicyRule) coverResult {
	set := u.sets[g.Namespace]
	k := coverage{rules: set.Key, role: g.Role, clusterWide: g.ClusterWide()}
	if c, ok := u.memo[k]; ok {
		return c
	}
	var c coverResult
	bind := rbacv1.PolicyRule{Verbs: []string{"bind"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, ResourceNames: []string{g.Role}}
	if c.bind, _ = rbacvalidation.Covers(set.Rules, []rbacv1.PolicyRule{bind}); !c.bind {
		granted := rules
		if !g.ClusterWide() {
			granted = nil
			for _, r := range rules {
				if len(r.NonResourceURLs) == 0 {
					granted = append(granted, r)
				}
			}
		}
		d, ok := u.digests[set.Key]
		if !ok {
			d = digestOf(set.Rules)
			u.digests[set.Key] = d
		}
		c.covered = u.shared.covers(d, set.Rules, granted)
	}
	u.memo[k] = c
	return c
}
