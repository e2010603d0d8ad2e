package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
type Authorizer struct {
	// Client creates SubjectAccessReviews.
	Client client.Client
	// Rules reads a user's rules (CachedRules); nil asks
	// SubjectAccessReviews for every permission.
	Rules RuleSource
	// Reader reads ClusterRoles (the API server, not a cache: oria caches
	// only the roles it generated).
	Reader client.Reader

	Parallelism    int
	MaxMissing     int
	MaxDenials     int
	MaxPermissions int

	// covers remembers what rules cover across requests.
	covers coversMemo
}

// Denial is one thing the user may not do.
type Denial struct {
	// Verb is "bind" (a grant) or "escalate" (an inline role).
	Verb string
	// Grant is the refused binding; for "escalate", Grant.Role is the role
	// and Namespace is "".
	Grant binding.Grant
	// Missing are permissions of the role the user does not hold (at most
	// MaxMissing).
	Missing []Permission
	// Absent is true when the role does not exist: only "bind" can allow
	// binding it.
	Absent bool
	// TooLarge is true when the role grants more than MaxPermissions.
	TooLarge bool
	// More is true when the search for missing permissions stopped at
	// MaxMissing: there may be others.
	More bool
}

// Message says what is missing, in the style of the API server's own
// refusal of an escalating binding.
func (d Denial) Message(user string) string {
	g := d.Grant
	var b strings.Builder
	if d.Verb == "escalate" {
		fmt.Fprintf(&b, "user %q may not create ClusterRole %q with these rules: needs %q on clusterroles/%s, or every permission it grants cluster-wide", user, g.Role, "escalate", g.Role)
	} else {
		fmt.Fprintf(&b, "user %q may not bind ClusterRole %q %s: needs %q on clusterroles/%s %s", user, g.Role, g.Where(), "bind", g.Role, there(g))
		if !d.Absent {
			b.WriteString(", or every permission it grants")
		}
	}
	switch {
	case d.Absent:
		b.WriteString(" (the ClusterRole does not exist yet, so only \"bind\" allows binding it)")
	case d.TooLarge:
		b.WriteString(" (it grants too many permissions to check one by one)")
	case len(d.Missing) > 0:
		missing := make([]string, len(d.Missing))
		for i, p := range d.Missing {
			missing[i] = p.String()
		}
		fmt.Fprintf(&b, " (missing: %s", strings.Join(missing, ", "))
		if d.More {
			b.WriteString(", ...")
		}
		b.WriteString(")")
	}
	return b.String()
}

func there(g binding.Grant) string {
	if g.ClusterWide() {
		return "cluster-wide"
	}
	return "there"
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
	sar := SubjectAccessReview(user, p)
	if err := a.Client.Create(ctx, sar); err != nil {
		return false, fmt.Errorf("SubjectAccessReview for %s: %w", p, err)
	}
	return sar.Status.Allowed, nil
}

// Unrestricted reports whether user may bind and escalate every ClusterRole
// cluster-wide (cluster admins, and oria itself): such a user passes every
// check, so nothing else needs to be asked.
func (a *Authorizer) Unrestricted(ctx context.Context, user authenticationv1.UserInfo) (bool, error) {
	denied, err := a.denied(ctx, user, []Permission{bindPermission("", ""), escalatePermission("")}, 1)
	return len(denied) == 0, err
}

// denied returns the permissions of perms that user does not hold, asking
// up to Parallelism at once and stopping once limit are found.
func (a *Authorizer) denied(ctx context.Context, user authenticationv1.UserInfo, perms []Permission, limit int) ([]Permission, error) {
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
		ctrl.LoggerFrom(ctx).Info("reading the user's rules failed; asking SubjectAccessReviews instead", "user", user.Username, "error", err.Error())
		u = nil
	}
	var rest []binding.Grant
	for _, g := range todo {
		if u != nil {
			rules, absent, err := roles.of(ctx, g.Role)
			if err != nil {
				return nil, err
			}
			if u.allows(g, rules, absent) {
				continue
			}
		}
		rest = append(rest, g)
	}
	return a.checkBindReviews(ctx, user, rest, roles)
}

// enough reports whether a refusal names as many denials as it should
// (MaxDenials): the rest would only lengthen the message.
func (a *Authorizer) enough(denials []Denial) bool {
	return len(denials) >= orDefault(a.MaxDenials, DefaultMaxDenials)
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
	denied, err := a.denied(ctx, user, perms, len(perms))
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(perms))
	for _, p := range perms {
		out[p.Name] = !slices.Contains(denied, p)
	}
	return out, nil
}

// CheckBindAny returns the places (grants with an empty Role) where user may
// not bind every ClusterRole: what binding roles that are not known yet
// needs.
func (a *Authorizer) CheckBindAny(ctx context.Context, user authenticationv1.UserInfo, places []binding.Grant) ([]binding.Grant, error) {
	perms := make([]Permission, len(places))
	for i, p := range places {
		perms[i] = bindPermission("", p.Namespace)
	}
	denied, err := a.denied(ctx, user, perms, orDefault(a.MaxDenials, DefaultMaxDenials))
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
	noEscalate, err := a.denied(ctx, user, perms, len(perms))
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
			if denials = append(denials, *d); a.enough(denials) {
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
	missing, err := a.denied(ctx, user, perms, limit)
	if err != nil || len(missing) == 0 {
		return nil, err
	}
	return &Denial{Verb: verb, Grant: g, Missing: missing, More: len(missing) >= limit}, nil
}
