package authz

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/binding"
)

// The questions and how they are asked: Permission, Denied (the
// SubjectAccessReviews, in parallel), Allowed and Ask (one of them); then,
// in the order CheckBind reaches them, checkBindReviews and holds, which
// settle with reviews the grants the rules in memory did not.

// Permission is one access a SubjectAccessReview can ask about: a verb on a
// resource (optionally a subresource and a name) in a namespace or
// cluster-wide, or a verb on a non-resource URL.
type Permission struct {
	Verb        string
	Group       string
	Resource    string
	Subresource string
	Name        string
	// Namespace is "" for cluster-wide (every namespace, and cluster-scoped
	// resources).
	Namespace string
	// NonResourceURL is set for a non-resource permission (then only Verb
	// counts).
	NonResourceURL string
}

// String reads like the API server's own escalation message: "get secrets",
// "create clusterrolebindings.rbac.authorization.k8s.io", `get configmaps
// "cfg"`, "get pods/log", "get non-resource URL /metrics".
func (p Permission) String() string {
	if p.NonResourceURL != "" {
		return p.Verb + " non-resource URL " + p.NonResourceURL
	}
	res := p.Resource
	if p.Subresource != "" {
		res += "/" + p.Subresource
	}
	if p.Group != "" {
		res += "." + p.Group
	}
	s := p.Verb + " " + res
	if p.Name != "" {
		s += fmt.Sprintf(" %q", p.Name)
	}
	return s
}

// bindPermission is "bind" on the ClusterRole named role (every ClusterRole
// when role is "") in namespace ("" cluster-wide): what Kubernetes requires
// to create a binding to a role whose permissions one does not hold.
func bindPermission(role, namespace string) Permission {
	return Permission{Verb: "bind", Group: rbacv1.GroupName, Resource: "clusterroles", Name: role, Namespace: namespace}
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

// SubjectAccessReview returns the review that asks whether user holds p.
func SubjectAccessReview(user authenticationv1.UserInfo, p Permission) *authorizationv1.SubjectAccessReview {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   user.Username,
		Groups: user.Groups,
		UID:    user.UID,
	}}
	if len(user.Extra) > 0 {
		sar.Spec.Extra = make(map[string]authorizationv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			sar.Spec.Extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	if p.NonResourceURL != "" {
		sar.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: p.NonResourceURL, Verb: p.Verb}
		return sar
	}
	sar.Spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
		Namespace: p.Namespace, Verb: p.Verb, Group: p.Group, Resource: p.Resource, Subresource: p.Subresource, Name: p.Name,
	}
	return sar
}

func comparePermissions(a, b Permission) int {
	return cmp.Or(
		cmp.Compare(a.Namespace, b.Namespace),
		cmp.Compare(a.NonResourceURL, b.NonResourceURL),
		cmp.Compare(a.Group, b.Group),
		cmp.Compare(a.Resource, b.Resource),
		cmp.Compare(a.Subresource, b.Subresource),
		cmp.Compare(a.Name, b.Name),
		cmp.Compare(a.Verb, b.Verb),
	)
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

// Expand returns every permission that rules grant when bound in namespace
// ("" cluster-wide), one per group × resource × verb × resource name,
// sorted and without duplicates. Wildcards stay literal ("*"): a
// SubjectAccessReview for verb "*" is allowed only by a rule that grants
// "*", which is exactly "holds this permission". Non-resource URLs are
// granted only by cluster-wide bindings, so a namespace gets none.
func Expand(rules []rbacv1.PolicyRule, namespace string) []Permission {
	var out []Permission
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			if namespace != "" {
				continue
			}
			for _, u := range r.NonResourceURLs {
				for _, v := range r.Verbs {
					out = append(out, Permission{Verb: v, NonResourceURL: u})
				}
			}
			continue
		}
		resourceNames := r.ResourceNames
		if len(resourceNames) == 0 {
			resourceNames = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				resource, sub, _ := strings.Cut(res, "/")
				for _, v := range r.Verbs {
					for _, n := range resourceNames {
						out = append(out, Permission{Verb: v, Group: g, Resource: resource, Subresource: sub, Name: n, Namespace: namespace})
					}
				}
			}
		}
	}
	slices.SortFunc(out, comparePermissions)
	return slices.Compact(out)
}

// escalatePermission is "escalate" on the ClusterRole named role (every
// ClusterRole when role is ""): what Kubernetes requires to write a role
// with permissions one does not hold.
func escalatePermission(role string) Permission {
	return Permission{Verb: "escalate", Group: rbacv1.GroupName, Resource: "clusterroles", Name: role}
}
