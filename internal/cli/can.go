package cli

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CanReport is the body of `kubectl oria can -o json|yaml`: what one
// identity may do with the APIs of every extension (or those named).
type CanReport struct {
	// User and Groups are the identity asked about (Groups include
	// system:authenticated for a user, and a ServiceAccount's groups).
	User   string   `json:"user,omitempty"`
	Groups []string `json:"groups,omitempty"`
	// Namespace is the -n the report is limited to, empty for all.
	Namespace string `json:"namespace,omitempty"`
	// Extensions are those named, empty for all.
	Extensions []string    `json:"extensions,omitempty"`
	Access     []AccessRow `json:"access"`
}

// CanOptions say whom `kubectl oria can` asks about, and where.
type CanOptions struct {
	User   string
	Groups []string
	// ServiceAccount is "<namespace>/<name>": the user becomes its user
	// name (system:serviceaccount:<namespace>:<name>).
	ServiceAccount string
	// Extensions limits the report to these ClusterExtensions (all when
	// empty); Namespace to one namespace ("" all).
	Extensions []string
	Namespace  string
}

// Identity returns the identity the options name.
func (o CanOptions) Identity() (Identity, error) {
	user := o.User
	if o.ServiceAccount != "" {
		ns, name, ok := cutNamespaced(o.ServiceAccount)
		if !ok || user != "" {
			return Identity{}, fmt.Errorf("--serviceaccount takes NAMESPACE/NAME, and no user besides")
		}
		user = serviceaccount.MakeUsername(ns, name)
	}
	if user == "" && len(o.Groups) == 0 {
		return Identity{}, fmt.Errorf("name a user, --group or --serviceaccount")
	}
	return UserIdentity(user, o.Groups), nil
}

func cutNamespaced(s string) (ns, name string, ok bool) {
	ns, name, ok = strings.Cut(s, "/")
	return ns, name, ok && ns != "" && name != "" && !strings.Contains(name, "/")
}

// ExtensionsAPIs returns the APIs of the named extensions (every extension
// of the snapshot when none is named), sorted by CRD name, and the
// extension of each API. A named extension that does not exist is an
// error.
func ExtensionsAPIs(s *Snapshot, extensions []string) ([]API, map[string]string, error) {
	if _, err := Status(s, extensions...); err != nil {
		return nil, nil, err
	}
	if len(extensions) == 0 {
		for _, e := range s.Extensions {
			extensions = append(extensions, e.Name)
		}
	}
	var apis []API
	owner := map[string]string{}
	for _, e := range extensions {
		for _, api := range ExtensionAPIs(s.CRDs, e) {
			apis, owner[api.CRD] = append(apis, api), e
		}
	}
	slices.SortFunc(apis, func(a, b API) int { return cmp.Compare(a.CRD, b.CRD) })
	return apis, owner, nil
}

// ConfirmFor asks az which verbs id may use on apis through the
// candidates that name it (its user, one of its groups or its
// ServiceAccount), and returns one row per namespace and API, each via
// naming the subject it binds. Rows carry their extension (owner) and are
// sorted by extension, namespace and API.
func ConfirmFor(ctx context.Context, az Authorizer, id Identity, cands []Candidate, apis []API, owner map[string]string, namespace string) ([]AccessRow, error) {
	checks, err := group(cands, apis, namespace, func(c Candidate) (string, Identity, string, error) {
		if !id.Names(c.Subject) {
			return "", Identity{}, "", nil
		}
		return id.String(), id, c.Via + " (" + SubjectString(c.Subject) + ")", nil
	})
	if err != nil {
		return nil, err
	}
	rows, err := confirm(ctx, az, checks)
	if err != nil {
		return nil, err
	}
	for i := range rows {
		rows[i].Extension = owner[rows[i].API]
	}
	slices.SortStableFunc(rows, func(a, b AccessRow) int {
		return cmp.Or(cmp.Compare(a.Extension, b.Extension), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.API, b.API))
	})
	return rows, nil
}

// Can builds the reverse lookup: what the identity of opts may do with the
// extensions' APIs, confirmed by az.
func Can(ctx context.Context, c client.Reader, az Authorizer, opts CanOptions) (*CanReport, []string, error) {
	id, err := opts.Identity()
	if err != nil {
		return nil, nil, err
	}
	s, err := Read(ctx, c, What{Bindings: true, Namespace: opts.Namespace, Extensions: opts.Extensions})
	if err != nil {
		return nil, nil, err
	}
	apis, owner, err := ExtensionsAPIs(s, opts.Extensions)
	if err != nil {
		return nil, nil, err
	}
	rows, err := ConfirmFor(ctx, az, id, Candidates(s, apis, opts.Namespace), apis, owner, opts.Namespace)
	if err != nil {
		return nil, nil, err
	}
	return &CanReport{User: id.User, Groups: id.Groups, Namespace: opts.Namespace, Extensions: opts.Extensions, Access: rows}, s.Warnings, nil
}
