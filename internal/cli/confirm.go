package cli

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// check is one (identity, namespace, API) the report asks about.
type check struct {
	id        Identity
	subject   string // the row's subject
	namespace string // "" every namespace / cluster-scoped
	api       API
	via       []string
	bindings  []string
	// expiresAt is the latest end of the vias' time-bound grants; open is
	// set when a via has no end (the row's access has none).
	expiresAt *metav1.Time
	open      bool
}

// addVia records that candidate c, named via, gives the check's access.
func (ch *check) addVia(c Candidate, via string) {
	if !slices.Contains(ch.via, via) {
		ch.via = append(ch.via, via)
	}
	if c.Binding != "" && !slices.Contains(ch.bindings, c.Binding) {
		ch.bindings = append(ch.bindings, c.Binding)
	}
	switch {
	case c.Window == nil || c.Window.ExpiresAt == nil:
		ch.open = true
	case ch.expiresAt == nil || ch.expiresAt.Before(c.Window.ExpiresAt):
		ch.expiresAt = c.Window.ExpiresAt.DeepCopy()
	}
}

// verbs are the verbs of every level, lowest first: what a report asks.
func verbs() []string {
	var out []string
	for _, l := range levels {
		out = append(out, l.verbs...)
	}
	return out
}

// confirmWorkers is how many SubjectAccessReviews are asked at once.
const confirmWorkers = 16

// Confirm asks az, for every candidate subject, namespace and API, which
// verbs are allowed, and returns the rows with at least one allowed verb.
// A RoleBinding grants nothing on a cluster-scoped API, so those are asked
// only for cluster-wide candidates. When namespace is set, cluster-wide
// candidates are asked about that namespace. Rows are sorted by namespace,
// subject and API.
func Confirm(ctx context.Context, az Authorizer, cands []Candidate, apis []API, namespace string) ([]AccessRow, error) {
	checks, err := group(cands, apis, namespace, func(c Candidate) (string, Identity, string, error) {
		id, err := SubjectIdentity(c.Subject)
		return SubjectString(c.Subject), id, c.Via, err
	})
	if err != nil {
		return nil, err
	}
	return confirm(ctx, az, checks)
}

// confirm asks az about every verb of every check, in parallel, and
// returns the rows with at least one allowed verb, in the order of checks.
func confirm(ctx context.Context, az Authorizer, checks []check) ([]AccessRow, error) {
	all := verbs()
	allowed := make([][]bool, len(checks))
	for i := range allowed {
		allowed[i] = make([]bool, len(all))
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(confirmWorkers)
	for i, c := range checks {
		for j, v := range all {
			g.Go(func() error {
				ok, err := az.Allowed(gctx, c.id, authorizationv1.ResourceAttributes{
					Namespace: c.namespace, Verb: v, Group: c.api.Group, Resource: c.api.Resource,
				})
				allowed[i][j] = ok // each goroutine its own cell
				return err
			})
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var rows []AccessRow
	for i, c := range checks {
		row := AccessRow{Subject: c.subject, Namespace: cmp.Or(c.namespace, AllNamespaces), API: c.api.CRD, Via: c.via, Bindings: c.bindings}
		if !c.open {
			row.ExpiresAt = c.expiresAt
		}
		for j, v := range all {
			if allowed[i][j] {
				row.Verbs = append(row.Verbs, v)
			}
		}
		if len(row.Verbs) == 0 {
			continue
		}
		row.Level, row.Base = level(row.Verbs)
		rows = append(rows, row)
	}
	return rows, nil
}

// group turns candidates into checks: one per subject (as who names it),
// namespace and API, with every binding that applies there as its via.
// who returns the row's subject, the identity to ask about, and the via
// to list; a candidate for which it returns "" is left out.
func group(cands []Candidate, apis []API, namespace string, who func(Candidate) (string, Identity, string, error)) ([]check, error) {
	type key struct {
		subject   string
		namespace string
		api       string
	}
	byKey := map[key]*check{}
	var order []key
	add := func(c Candidate, ns string, api API) error {
		subject, id, via, err := who(c)
		if err != nil || subject == "" {
			return err
		}
		k := key{subject, ns, api.CRD}
		ch, ok := byKey[k]
		if !ok {
			ch = &check{id: id, subject: subject, namespace: ns, api: api}
			byKey[k], order = ch, append(order, k)
		}
		ch.addVia(c, via)
		return nil
	}
	for _, api := range apis {
		for _, c := range cands {
			if !slices.Contains(c.APIs, api.CRD) {
				continue
			}
			var err error
			switch {
			case api.Scope == ScopeCluster:
				if c.Namespace == "" {
					err = add(c, "", api)
				}
			case c.Namespace != "":
				err = add(c, c.Namespace, api)
			default:
				err = add(c, namespace, api)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	// A cluster-wide grant holds in every namespace a RoleBinding row is
	// about: name it there too.
	for _, api := range apis {
		for _, c := range cands {
			if c.Namespace != "" || api.Scope == ScopeCluster || !slices.Contains(c.APIs, api.CRD) {
				continue
			}
			subject, _, via, _ := who(c)
			for _, k := range order {
				if k.subject == subject && k.api == api.CRD && k.namespace != "" {
					byKey[k].addVia(c, via)
				}
			}
		}
	}
	slices.SortFunc(order, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.subject, b.subject), cmp.Compare(a.api, b.api))
	})
	out := make([]check, len(order))
	for i, k := range order {
		out[i] = *byKey[k]
	}
	return out, nil
}

// level returns the level of verbs: the level whose verbs (with those of
// the levels below) are exactly verbs, else LevelPartial with base, the
// highest level all of whose verbs are held ("" when not even view).
// verbs are distinct verbs of the levels.
func level(verbs []string) (lvl, base string) {
	complete := 0
	for _, l := range levels {
		for _, v := range l.verbs {
			if !slices.Contains(verbs, v) {
				if base != "" && complete == len(verbs) {
					return base, ""
				}
				return LevelPartial, base
			}
		}
		base, complete = l.level, complete+len(l.verbs)
	}
	return base, ""
}

// Describe is a one-line summary of a row's verbs for the table: the
// level, "view+update,patch,delete" for a level and some verbs above it,
// "partial (verbs)" for less than view.
func Describe(r AccessRow) string {
	if r.Level != LevelPartial {
		return r.Level
	}
	if r.Base == "" {
		return "partial (" + strings.Join(r.Verbs, ",") + ")"
	}
	var above []string
	below := true
	for _, l := range levels {
		for _, v := range l.verbs {
			if !below && slices.Contains(r.Verbs, v) {
				above = append(above, v)
			}
		}
		if l.level == r.Base {
			below = false
		}
	}
	return r.Base + "+" + strings.Join(above, ",")
}
