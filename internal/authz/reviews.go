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
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/ownership"
)

// The reviews themselves: Denied asks SubjectAccessReviews in parallel;
// checkBindReviews settles the grants the rules in memory did not.

// checkBindReviews checks grants with SubjectAccessReviews: "bind" on the
// role where it is bound, else every permission it grants there.
//
// It names at most maxDenials.
func (a *Authorizer) checkBindReviews(ctx context.Context, user authenticationv1.UserInfo, grants []binding.Grant, roles *roleRules, maxDenials int) ([]Denial, error) {
	var denials []Denial
	perms := make([]Permission, 0, len(grants))
	byPerm := make(map[Permission]binding.Grant, len(grants))
	for _, g := range grants {
		p := bindPermission(g.Role, g.Namespace)
		perms = append(perms, p)
		byPerm[p] = g
	}
	noBind, err := a.Denied(ctx, user, perms, len(perms))
	if err != nil {
		return nil, err
	}
	for _, p := range noBind {
		g := byPerm[p]
		role, err := roles.of(ctx, g.Role)
		if err != nil {
			return nil, err
		}
		if role.onlyBind() {
			if denials = append(denials, Denial{Verb: "bind", Grant: g, Absent: role.absent, InlineOf: role.inlineOf}); len(denials) >= maxDenials {
				break
			}
			continue
		}
		d, err := a.holds(ctx, user, "bind", g, role.rules)
		if err != nil {
			return nil, err
		}
		if d != nil {
			if denials = append(denials, *d); len(denials) >= maxDenials {
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

// boundRole is what a check knows of a role it binds.
type boundRole struct {
	rules []rbacv1.PolicyRule
	// absent: the role does not exist.
	absent bool
	// inlineOf names the other ScopeTemplate whose inline role this is:
	// oria rewrites it whenever that template changes, so its rules now
	// say nothing of what a binding of it will grant later.
	inlineOf string
}

// onlyBind is true when only "bind" on the role allows binding it: holding
// its rules is no proof, because there are none yet or they change without
// the binder.
func (b boundRole) onlyBind() bool { return b.absent || b.inlineOf != "" }

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

// Denied returns the permissions of perms that user does not hold, asking
// up to Parallelism at once and stopping once limit are found.
func (a *Authorizer) Denied(ctx context.Context, user authenticationv1.UserInfo, perms []Permission, limit int) ([]Permission, error) {
	// Once enough are found (or one failed) no more reviews are started;
	// those in flight are waited for rather than cancelled (at most
	// Parallelism, started together: about one round trip), which leaves no
	// cancelled request behind to be logged as an error.
	var (
		mu     sync.Mutex
		out    []Permission
		errs   []error
		wg     sync.WaitGroup
		tokens = make(chan struct{}, a.parallelism())
		stop   = make(chan struct{})
		halt   = sync.OnceFunc(func() { close(stop) })
	)
	halted := func() bool {
		select {
		case <-stop:
			return true
		default:
			return ctx.Err() != nil
		}
	}
	for _, p := range perms {
		select {
		case tokens <- struct{}{}:
		case <-stop:
		case <-ctx.Done():
		}
		if halted() {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-tokens; wg.Done() }()
			ok, err := a.Allowed(ctx, user, p)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil && ctx.Err() == nil:
				errs = append(errs, err)
				halt()
			case err == nil && !ok:
				out = append(out, p)
				if len(out) >= limit {
					halt()
				}
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := ctx.Err(); err != nil {
		// Cut short from outside (the request's deadline): what was not
		// asked is not known to be allowed.
		return nil, fmt.Errorf("checking %d permissions: %w", len(perms), err)
	}
	slices.SortFunc(out, comparePermissions)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
