package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/binding"
)

// checkBindReviews checks grants with SubjectAccessReviews: "bind" on the
// role where it is bound, else every permission it grants there.
func (a *Authorizer) checkBindReviews(ctx context.Context, user authenticationv1.UserInfo, grants []binding.Grant, roles *roleRules) ([]Denial, error) {
	var denials []Denial
	perms := make([]Permission, 0, len(grants))
	byPerm := make(map[Permission]binding.Grant, len(grants))
	for _, g := range grants {
		p := bindPermission(g.Role, g.Namespace)
		perms = append(perms, p)
		byPerm[p] = g
	}
	noBind, err := a.denied(ctx, user, perms, len(perms))
	if err != nil {
		return nil, err
	}
	for _, p := range noBind {
		g := byPerm[p]
		rules, absent, err := roles.of(ctx, g.Role)
		if err != nil {
			return nil, err
		}
		if absent {
			if denials = append(denials, Denial{Verb: "bind", Grant: g, Absent: true}); a.enough(denials) {
				break
			}
			continue
		}
		d, err := a.holds(ctx, user, "bind", g, rules)
		if err != nil {
			return nil, err
		}
		if d != nil {
			if denials = append(denials, *d); a.enough(denials) {
				break
			}
		}
	}
	return denials, nil
}

// roleRules reads the rules of the roles a check binds, once each: inline
// roles from the template, others from the API server.
type roleRules struct {
	a      *Authorizer
	inline map[string][]rbacv1.PolicyRule
	read   map[string]*rbacv1.ClusterRole
}

// of returns the rules of role, or absent when it does not exist.
func (r *roleRules) of(ctx context.Context, role string) (rules []rbacv1.PolicyRule, absent bool, err error) {
	if rules, ok := r.inline[role]; ok {
		return rules, false, nil
	}
	cr, found := r.read[role]
	if !found {
		cr = &rbacv1.ClusterRole{}
		if err := r.a.Reader.Get(ctx, client.ObjectKey{Name: role}, cr); err != nil {
			if !apierrors.IsNotFound(err) {
				return nil, false, fmt.Errorf("reading ClusterRole %q: %w", role, err)
			}
			cr = nil
		}
		r.read[role] = cr
	}
	if cr == nil {
		return nil, true, nil
	}
	return cr.Rules, false, nil
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
			if err := r.a.Reader.Get(ctx, client.ObjectKey{Name: name}, cr); err != nil {
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
