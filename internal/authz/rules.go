package authz

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"

	"github.com/operator-framework/oria/internal/binding"
)

// RuleSource reads the rules a user holds in each of namespaces (""
// cluster-wide): what lets the guard answer a grant over 100 namespaces
// from one comparison of rule sets, where SubjectAccessReviews ask one
// permission at a time (an instance listing 100 namespaces for a namespace
// admin once asked 59,000 and ran out of time). CachedRules is oria's.
//
// The rules need not be complete: a grant they cover is allowed, one they
// do not is asked of the API server with SubjectAccessReviews (another
// authorizer may allow it), so that a refusal is never the rules' word
// alone.
type RuleSource interface {
	RulesIn(ctx context.Context, user authenticationv1.UserInfo, namespaces []string) (map[string]RuleSet, error)
}

// NoRules is the RuleSource of an Authorizer that holds no rules in
// memory: every grant is asked with SubjectAccessReviews (the ServiceAccount
// ceiling, which asks about a few bindings now and then).
type NoRules struct{}

// RulesIn implements RuleSource: no rules anywhere.
func (NoRules) RulesIn(context.Context, authenticationv1.UserInfo, []string) (map[string]RuleSet, error) {
	return nil, nil
}

// RuleSet is the rules a user holds in one place. Key identifies them:
// equal keys, equal rules (a user is usually admin of many namespaces, and
// what those rules cover is worked out once).
type RuleSet struct {
	Key   string
	Rules []rbacv1.PolicyRule
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

// allows answers a grant from the user's rules where it binds, as
// Kubernetes' own escalation check does (rbacvalidation.Covers): allowed
// with "bind" on the role there, or when the rules cover every rule of the
// role (which must exist and not be another template's inline role:
// onlyBind). false means only that the rules do not settle it:
// SubjectAccessReviews must.
func (u *userRules) allows(g binding.Grant, rules []rbacv1.PolicyRule, onlyBind bool) bool {
	c := u.cover(g, rules)
	return c.bind || (!onlyBind && c.covered)
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
