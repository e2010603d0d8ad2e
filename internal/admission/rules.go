package admission

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"

	"github.com/operator-framework/oria/internal/binding"
)

// RulesReviewer reads the rules a user holds in a namespace with one
// SelfSubjectRulesReview made as that user (impersonating their name and
// groups, which is all RBAC looks at). One review answers every permission
// of every role in that namespace, where asking SubjectAccessReviews one
// permission at a time costs hundreds per role: an instance listing 100
// namespaces for a namespace admin asked 59,000 and ran out of time.
type RulesReviewer struct {
	// REST is a client of authorization.k8s.io/v1.
	REST rest.Interface
}

// NewRulesReviewer returns a reviewer for the cluster of cfg.
func NewRulesReviewer(cfg *rest.Config) (*RulesReviewer, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the rules reviewer's client: %w", err)
	}
	return &RulesReviewer{REST: cs.AuthorizationV1().RESTClient()}, nil
}

// Rules returns the rules user holds in namespace ("": cluster-wide, the
// rules of their ClusterRoleBindings), and whether the list is
// complete (every authorizer could list its rules; otherwise a permission
// the rules do not cover may still be allowed, and only a
// SubjectAccessReview can tell).
func (r *RulesReviewer) Rules(ctx context.Context, user authenticationv1.UserInfo, namespace string) ([]rbacv1.PolicyRule, bool, error) {
	if namespace == "" {
		// A review needs a namespace. In one that does not exist, and
		// never did (an unguessable name), no RoleBinding can apply: what
		// is left are the rules of the user's ClusterRoleBindings, which
		// hold cluster-wide.
		namespace = nowhere()
	}
	review := &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: namespace}}
	out := &authorizationv1.SelfSubjectRulesReview{}
	req := r.REST.Post().Resource("selfsubjectrulesreviews").Body(review).
		SetHeader("Impersonate-User", user.Username)
	if len(user.Groups) > 0 {
		req = req.SetHeader("Impersonate-Group", user.Groups...)
	}
	if err := req.Do(ctx).Into(out); err != nil {
		return nil, false, fmt.Errorf("reviewing the rules of user %q in namespace %q: %w", user.Username, namespace, err)
	}
	rules := make([]rbacv1.PolicyRule, 0, len(out.Status.ResourceRules)+len(out.Status.NonResourceRules))
	for _, rr := range out.Status.ResourceRules {
		rules = append(rules, rbacv1.PolicyRule{Verbs: rr.Verbs, APIGroups: rr.APIGroups, Resources: rr.Resources, ResourceNames: rr.ResourceNames})
	}
	for _, nr := range out.Status.NonResourceRules {
		rules = append(rules, rbacv1.PolicyRule{Verbs: nr.Verbs, NonResourceURLs: nr.NonResourceURLs})
	}
	return rules, !out.Status.Incomplete, nil
}

// userRules are the rules of one user in each namespace of a check, read
// once per namespace, in parallel.
type userRules struct {
	rules    map[string][]rbacv1.PolicyRule
	complete map[string]bool
	// key is a canonical form of each namespace's rules: a user usually
	// holds the same rules in many namespaces (admin of each), and what
	// they cover is worked out once per distinct rule set (memo).
	key  map[string]string
	memo map[coverage]coverResult
}

// coverage is one question to rbacvalidation.Covers.
type coverage struct {
	rules, role string
	clusterWide bool
}

type coverResult struct {
	bind      bool
	covered   bool
	uncovered []rbacv1.PolicyRule
}

// rulesIn reads the rules of user in namespaces (nil when the Authorizer
// has no RulesReviewer).
func (a *Authorizer) rulesIn(ctx context.Context, user authenticationv1.UserInfo, namespaces []string) (*userRules, error) {
	if a.Rules == nil || len(namespaces) == 0 {
		return nil, nil
	}
	out := &userRules{rules: map[string][]rbacv1.PolicyRule{}, complete: map[string]bool{}, key: map[string]string{}, memo: map[coverage]coverResult{}}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		// A rules review is one request per namespace, not per
		// permission: more of them in flight than reviews.
		tokens = make(chan struct{}, 4*a.parallelism())
	)
	for _, ns := range namespaces {
		tokens <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-tokens; wg.Done() }()
			rules, complete, err := a.Rules.Rules(ctx, user, ns)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			key, _ := json.Marshal(rules)
			out.rules[ns], out.complete[ns], out.key[ns] = rules, complete, string(key)
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return out, nil
}

// decide answers a grant from the user's rules where it binds, as
// Kubernetes' own escalation check does (rbacvalidation.Covers): allowed
// with "bind" on the role there, or when the rules cover every rule of the
// role. ok is false when the rules are incomplete and do not settle it
// (SubjectAccessReviews must then).
func (a *Authorizer) decide(u *userRules, g binding.Grant, rules []rbacv1.PolicyRule, absent bool) (d *Denial, ok bool) {
	c := u.cover(g, rules)
	switch {
	case c.bind:
		return nil, true
	case absent:
		return &Denial{Verb: "bind", Grant: g, Absent: true}, u.complete[g.Namespace]
	case c.covered:
		return nil, true
	case !u.complete[g.Namespace]:
		return nil, false
	}
	missing := Expand(c.uncovered, g.Namespace)
	limit := orDefault(a.MaxMissing, DefaultMaxMissing)
	d = &Denial{Verb: "bind", Grant: g, Missing: missing, More: len(missing) > limit}
	if len(missing) > limit {
		d.Missing = missing[:limit]
	}
	return d, true
}

// cover compares the user's rules where g binds with "bind" on g's role and
// with the role's rules (less non-resource URLs in a namespace: a
// RoleBinding grants none), once per distinct rule set and role.
func (u *userRules) cover(g binding.Grant, rules []rbacv1.PolicyRule) coverResult {
	k := coverage{rules: u.key[g.Namespace], role: g.Role, clusterWide: g.ClusterWide()}
	if c, ok := u.memo[k]; ok {
		return c
	}
	have := u.rules[g.Namespace]
	var c coverResult
	bind := rbacv1.PolicyRule{Verbs: []string{"bind"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, ResourceNames: []string{g.Role}}
	if c.bind, _ = rbacvalidation.Covers(have, []rbacv1.PolicyRule{bind}); !c.bind {
		granted := rules
		if !g.ClusterWide() {
			granted = nil
			for _, r := range rules {
				if len(r.NonResourceURLs) == 0 {
					granted = append(granted, r)
				}
			}
		}
		c.covered, c.uncovered = rbacvalidation.Covers(have, granted)
	}
	u.memo[k] = c
	return c
}

// nowhere returns a random namespace name that no namespace has.
func nowhere() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "oria-cluster-scope-" + hex.EncodeToString(b)
}
