package admission

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/rbacrules"
)

// CachedRules reads a user's rules from the cluster's RBAC objects held in
// memory (package rbacrules), as the API server's RBAC authorizer does from
// its informers: checking an instance over 100 namespaces is one pass over
// the user's bindings, in process. (Before, one SelfSubjectRulesReview per
// namespace, made impersonating the user: p50 183 ms, p99 355 ms in the
// guard benchmark, and oria had to hold impersonate on users and groups.)
//
// Its rules are RBAC's only, and a moment behind the API server, as the
// API server's own authorizer is: what they cover is allowed, the rest is
// confirmed with SubjectAccessReviews (RuleSource).
type CachedRules struct {
	Cache *rbacrules.Cache
}

// RulesIn implements RuleSource. Until the cache has synced (the first
// seconds after oria starts) it waits, within ctx: a partial picture could
// only send more questions to SubjectAccessReviews, slowly.
func (c *CachedRules) RulesIn(ctx context.Context, user authenticationv1.UserInfo, namespaces []string) (map[string]RuleSet, error) {
	if err := c.Cache.WaitForSync(ctx); err != nil {
		return nil, fmt.Errorf("waiting for the cache of RBAC objects: %w", err)
	}
	held, err := rbacrules.Holdings(c.Cache, rbacrules.User{Name: user.Username, Groups: user.Groups}, namespaces)
	if err != nil {
		return nil, fmt.Errorf("reading the cached rules of user %q: %w", user.Username, err)
	}
	out := make(map[string]RuleSet, len(held))
	byKey := map[string]RuleSet{}
	for ns, h := range held {
		key := h.Key()
		set, ok := byKey[key]
		if !ok {
			rules, err := h.Rules(c.Cache)
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

// The guard reads every RBAC object of the cluster into its cache of rules.
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings;clusterroles;clusterrolebindings,verbs=list;watch

// NewCachedRules returns the guard's rules, read from a cache that mgr runs
// (on every replica) over every RBAC object oria does not own, and from
// mgr's cache for those it does. The replica reports ready (readyz) once
// that cache has synced.
func NewCachedRules(mgr ctrl.Manager) (*CachedRules, error) {
	rc, err := rbacrules.NewCache(rbacrules.Config{
		REST:    mgr.GetConfig(),
		Options: cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()},
		Own:     mgr.GetCache(), OwnedKey: oriav1alpha1.LabelManaged, OwnedValue: oriav1alpha1.ManagedValue,
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(rc); err != nil {
		return nil, fmt.Errorf("adding the cache of RBAC objects: %w", err)
	}
	if err := mgr.AddReadyzCheck("rbac-cache", func(*http.Request) error {
		if !rc.Synced() {
			return errors.New("the escalation guard's cache of RBAC objects has not synced yet")
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("adding the readiness check of the cache of RBAC objects: %w", err)
	}
	return &CachedRules{Cache: rc}, nil
}
