package cli

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/ownership"
)

// Access levels. A level is reached when every verb of it and of the levels
// below is allowed: view = get, list, watch; edit = view + create, update,
// patch, delete; admin = edit + deletecollection (the generated -admin role
// grants every verb, -edit does not grant deletecollection). Some verbs
// without all of view is LevelPartial.
const (
	LevelView    = "view"
	LevelEdit    = "edit"
	LevelAdmin   = "admin"
	LevelPartial = "partial"
)

// levels lists the verbs each level adds, lowest first.
var levels = []struct {
	level string
	verbs []string
}{
	{LevelView, []string{"get", "list", "watch"}},
	{LevelEdit, []string{"create", "update", "patch", "delete"}},
	{LevelAdmin, []string{"deletecollection"}},
}

// AllNamespaces is the Namespace of an access row that holds in every
// namespace (a ClusterRoleBinding), or for a cluster-scoped API.
const AllNamespaces = "*"

// Candidate is a subject that a binding gives some rule on an extension's
// APIs: the access report asks the authorizer about each.
type Candidate struct {
	Subject rbacv1.Subject
	// Namespace is the RoleBinding's; "" for a ClusterRoleBinding.
	Namespace string
	// Via says through what: an RBACPolicy, a ScopeInstance, Legacy
	// aggregation into a built-in role, or a binding made by hand.
	Via string
}

// legacyRoles are the built-in roles generated roles aggregate into in
// Legacy mode.
var legacyRoles = map[string]bool{"admin": true, "edit": true, "view": true}

// Candidates returns the subjects of every binding whose role has a rule
// on one of apis (an aggregated role included: its rules are the union the
// aggregation controller wrote), sorted. Only RoleBindings in namespace
// count when it is set.
func Candidates(s *Snapshot, apis []API, namespace string) []Candidate {
	covers := func(rules []rbacv1.PolicyRule) bool {
		for _, r := range rules {
			for _, api := range apis {
				if (slices.Contains(r.APIGroups, api.Group) || slices.Contains(r.APIGroups, "*")) &&
					(slices.Contains(r.Resources, api.Resource) || slices.Contains(r.Resources, "*")) && len(r.Verbs) > 0 {
					return true
				}
			}
		}
		return false
	}
	clusterRoles := map[string]bool{}
	for _, cr := range s.ClusterRoles {
		clusterRoles[cr.Name] = covers(cr.Rules)
	}
	roles := map[string]bool{}
	for _, r := range s.Roles {
		roles[r.Namespace+"/"+r.Name] = covers(r.Rules)
	}
	instances := map[string]*oriav1alpha1.ScopeInstance{}
	for i := range s.Instances {
		instances[s.Instances[i].Name] = &s.Instances[i]
	}
	var out []Candidate
	for _, b := range s.ClusterRoleBindings {
		if b.RoleRef.Kind == "ClusterRole" && clusterRoles[b.RoleRef.Name] {
			via := via("ClusterRoleBinding", &b.ObjectMeta, b.RoleRef, instances)
			for _, sub := range b.Subjects {
				out = append(out, Candidate{Subject: sub, Via: via})
			}
		}
	}
	for _, b := range s.RoleBindings {
		if namespace != "" && b.Namespace != namespace {
			continue
		}
		if (b.RoleRef.Kind == "ClusterRole" && clusterRoles[b.RoleRef.Name]) || (b.RoleRef.Kind == "Role" && roles[b.Namespace+"/"+b.RoleRef.Name]) {
			via := via("RoleBinding", &b.ObjectMeta, b.RoleRef, instances)
			for _, sub := range b.Subjects {
				if sub.Kind == rbacv1.ServiceAccountKind && sub.Namespace == "" {
					sub.Namespace = b.Namespace
				}
				out = append(out, Candidate{Subject: sub, Namespace: b.Namespace, Via: via})
			}
		}
	}
	slices.SortFunc(out, func(a, b Candidate) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(SubjectString(a.Subject), SubjectString(b.Subject)), cmp.Compare(a.Via, b.Via))
	})
	return slices.Compact(out)
}

// via names what a binding is: oria's binding for a ScopeInstance (of an
// RBACPolicy), a binding to a built-in role the extension's roles aggregate
// into (Legacy), or a binding someone made.
func via(kind string, b *metav1.ObjectMeta, ref rbacv1.RoleRef, instances map[string]*oriav1alpha1.ScopeInstance) string {
	name := b.Name
	if b.Namespace != "" {
		name = b.Namespace + "/" + b.Name
	}
	if b.Labels[oriav1alpha1.LabelManagedBy] == oriav1alpha1.ManagedByValue {
		if si := ownership.ControllerName(b.OwnerReferences, ownership.KindScopeInstance); si != "" {
			if inst, ok := instances[si]; ok {
				if p := ownership.ControllerName(inst.OwnerReferences, ownership.KindRBACPolicy); p != "" {
					return "RBACPolicy " + p
				}
			}
			return "ScopeInstance " + si
		}
	}
	if ref.Kind == "ClusterRole" && legacyRoles[ref.Name] {
		return fmt.Sprintf("Legacy aggregation: %s %s -> %s", kind, name, ref.Name)
	}
	return fmt.Sprintf("%s %s -> %s %s", kind, name, ref.Kind, ref.Name)
}

// SubjectString writes a subject as "User alice", "Group developers" or
// "ServiceAccount ns/name".
func SubjectString(s rbacv1.Subject) string {
	if s.Kind == rbacv1.ServiceAccountKind {
		return s.Kind + " " + s.Namespace + "/" + s.Name
	}
	return s.Kind + " " + s.Name
}

// AccessRow is one confirmed access: the subject may use the API in the
// namespace at the level (the authorizer's answer), through Via.
type AccessRow struct {
	Subject string `json:"subject"`
	// Namespace is AllNamespaces for every namespace or a cluster-scoped API.
	Namespace string   `json:"namespace"`
	API       string   `json:"api"`
	Level     string   `json:"level"`
	Verbs     []string `json:"verbs"`
	Via       []string `json:"via"`
}

// Authorizer answers whether a subject may do something: the API server's
// SubjectAccessReview (SARAuthorizer), or a fake in tests.
type Authorizer interface {
	Allowed(ctx context.Context, s rbacv1.Subject, attrs authorizationv1.ResourceAttributes) (bool, error)
}

// SARAuthorizer asks the API server with SubjectAccessReviews.
type SARAuthorizer struct {
	Client client.Client
}

// Allowed implements Authorizer.
func (a SARAuthorizer) Allowed(ctx context.Context, s rbacv1.Subject, attrs authorizationv1.ResourceAttributes) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &attrs}}
	switch s.Kind {
	case rbacv1.UserKind:
		sar.Spec.User = s.Name
	case rbacv1.GroupKind:
		sar.Spec.Groups = []string{s.Name}
	case rbacv1.ServiceAccountKind:
		sar.Spec.User = serviceaccount.MakeUsername(s.Namespace, s.Name)
		sar.Spec.Groups = serviceaccount.MakeGroupNames(s.Namespace)
	default:
		return false, fmt.Errorf("unknown subject kind %q", s.Kind)
	}
	if err := a.Client.Create(ctx, sar); err != nil {
		return false, fmt.Errorf("SubjectAccessReview for %s: %w", SubjectString(s), err)
	}
	return sar.Status.Allowed, nil
}

// check is one (subject, namespace, API) the report asks about.
type check struct {
	subject   rbacv1.Subject
	namespace string // "" every namespace / cluster-scoped
	api       API
	via       []string
}

// Confirm asks az, for every candidate subject, namespace and API, which
// verbs are allowed, and returns the rows with at least one allowed verb.
// A RoleBinding grants nothing on a cluster-scoped API, so those are asked
// only for cluster-wide candidates. When namespace is set, cluster-wide
// candidates are asked about that namespace. Rows are sorted by namespace,
// subject and API.
func Confirm(ctx context.Context, az Authorizer, cands []Candidate, apis []API, namespace string) ([]AccessRow, error) {
	checks := plan(cands, apis, namespace)
	var verbs []string
	for _, l := range levels {
		verbs = append(verbs, l.verbs...)
	}
	allowed := make([][]bool, len(checks))
	var mu sync.Mutex
	var firstErr error
	engine.Parallel(16, len(checks)*len(verbs), func(i int) {
		c, v := checks[i/len(verbs)], verbs[i%len(verbs)]
		ok, err := az.Allowed(ctx, c.subject, authorizationv1.ResourceAttributes{
			Namespace: c.namespace, Verb: v, Group: c.api.Group, Resource: c.api.Resource,
		})
		mu.Lock()
		defer mu.Unlock()
		if err != nil && firstErr == nil {
			firstErr = err
		}
		if allowed[i/len(verbs)] == nil {
			allowed[i/len(verbs)] = make([]bool, len(verbs))
		}
		allowed[i/len(verbs)][i%len(verbs)] = ok
	})
	if firstErr != nil {
		return nil, firstErr
	}
	var rows []AccessRow
	for i, c := range checks {
		row := AccessRow{Subject: SubjectString(c.subject), Namespace: cmp.Or(c.namespace, AllNamespaces), API: c.api.CRD, Via: c.via}
		for j, v := range verbs {
			if allowed[i][j] {
				row.Verbs = append(row.Verbs, v)
			}
		}
		if len(row.Verbs) == 0 {
			continue
		}
		row.Level = level(row.Verbs)
		rows = append(rows, row)
	}
	return rows, nil
}

// plan groups candidates into checks: one per subject, namespace and API,
// with every binding that applies there as its via.
func plan(cands []Candidate, apis []API, namespace string) []check {
	type key struct {
		subject   string
		namespace string
		api       string
	}
	byKey := map[key]*check{}
	var order []key
	add := func(c Candidate, ns string, api API) {
		k := key{SubjectString(c.Subject), ns, api.CRD}
		ch, ok := byKey[k]
		if !ok {
			ch = &check{subject: c.Subject, namespace: ns, api: api}
			byKey[k], order = ch, append(order, k)
		}
		if !slices.Contains(ch.via, c.Via) {
			ch.via = append(ch.via, c.Via)
		}
	}
	for _, api := range apis {
		for _, c := range cands {
			switch {
			case api.Scope == ScopeCluster:
				if c.Namespace == "" {
					add(c, "", api)
				}
			case c.Namespace != "":
				add(c, c.Namespace, api)
			default:
				add(c, namespace, api)
			}
		}
	}
	// A cluster-wide grant holds in every namespace a RoleBinding row is
	// about: name it there too.
	for _, api := range apis {
		for _, c := range cands {
			if c.Namespace != "" || api.Scope == ScopeCluster {
				continue
			}
			for _, k := range order {
				if k.subject == SubjectString(c.Subject) && k.api == api.CRD && k.namespace != "" {
					if ch := byKey[k]; !slices.Contains(ch.via, c.Via) {
						ch.via = append(ch.via, c.Via)
					}
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
	return out
}

// level returns the highest level all of whose verbs are in verbs.
func level(verbs []string) string {
	got := LevelPartial
	for _, l := range levels {
		for _, v := range l.verbs {
			if !slices.Contains(verbs, v) {
				return got
			}
		}
		got = l.level
	}
	return got
}

// Describe is a one-line summary of verbs for the table.
func Describe(r AccessRow) string {
	if r.Level == LevelPartial {
		return "partial (" + strings.Join(r.Verbs, ",") + ")"
	}
	return r.Level
}
