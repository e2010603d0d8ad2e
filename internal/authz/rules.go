package authz

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/operator-framework/oria/internal/rbacrules"
	"github.com/operator-framework/oria/internal/subjects"
)

// Where a user's rules in memory come from: RuleSource, with NoRules and
// CachedRules (package rbacrules). How they answer a grant (rulesIn, allows,
// cover) is in authorizer.go, in CheckBind's order.

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

// CachedRules reads a user's rules from the cluster's RBAC objects held in
// memory (package rbacrules), as the API server's RBAC authorizer does from
// its informers: checking an instance over 100 namespaces is one pass over
// the user's bindings, in process. (Before, one SelfSubjectRulesReview per
// namespace, made impersonating the user: several times slower in the guard
// benchmark (docs/benchmarks.md, History, aa8b025), and oria had to hold
// impersonate on users and groups.)
//
// Its rules are RBAC's only, and a moment behind the API server, as the
// API server's own authorizer is: what they cover is allowed, the rest is
// confirmed with SubjectAccessReviews (RuleSource). The manager wiring of
// its cache (every replica, readiness once synced) is
// rbacrules.AddToManager.
type CachedRules struct {
	cache *rbacrules.Cache
}

// NewCachedRules returns the rules read from c.
func NewCachedRules(c *rbacrules.Cache) *CachedRules {
	return &CachedRules{cache: c}
}

// RulesIn implements RuleSource. Until the cache has synced (the first
// seconds after oria starts) it waits, within ctx: a partial picture could
// only send more questions to SubjectAccessReviews, slowly.
func (c *CachedRules) RulesIn(ctx context.Context, user authenticationv1.UserInfo, namespaces []string) (map[string]RuleSet, error) {
	if err := c.cache.WaitForSync(ctx); err != nil {
		return nil, fmt.Errorf("waiting for the cache of RBAC objects: %w", err)
	}
	held, err := rbacrules.Holdings(c.cache, subjects.Identity{User: user.Username, Groups: user.Groups}, namespaces)
	if err != nil {
		return nil, fmt.Errorf("reading the cached rules of user %q: %w", user.Username, err)
	}
	out := make(map[string]RuleSet, len(held))
	byKey := map[string]RuleSet{}
	for ns, h := range held {
		key := h.Key()
		set, ok := byKey[key]
		if !ok {
			rules, err := h.Rules(c.cache)
			if err != nil {
				return nil, fmt.Errorf("reading the cached rules of user %q: %w", user.Username, err)
			}
			set = RuleSet{Key: key, Rules: rules}
			byKey[key] = set
		}
		out[ns] = set
	}
	return out, nil
}
