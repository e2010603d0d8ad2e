package seqfuzz

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/testutil"
)

// World is one run of a sequence: its own namespaces (d, n, v1, v2), its
// own users (D, N, C, S and the victim V), and what its steps made. A run
// never sees another's objects, so a sequence replays the same on a fresh
// World (the shrinker relies on it).
type World struct {
	env    *Env
	Prefix string
	// Users: persona key → user name; Clients: persona key → a client
	// impersonating it.
	Users   map[string]string
	Clients map[string]client.Client
	Grants  []grantRef
	Objects []objRef
	// roles are ClusterRoles the personas made (removed at clean-up).
	roles []string
	seq   int
	// Eligible access (eligible.go): the run's eligible policies and
	// requests, and clients of the personas in their groups.
	eligible []string
	requests []string
	inGroups map[string]client.Client
	// stepViolations are what a step's own checks found (a leader
	// change's), taken by the runner after the step.
	stepViolations []Violation
}

// takeViolations returns the violations the last step found, as seen after
// step (1-based), and forgets them.
func (w *World) takeViolations(step int) []Violation {
	v := w.stepViolations
	w.stepViolations = nil
	for i := range v {
		v[i].Step = step
	}
	return v
}

// grantRef is an admin grant: a ScopeInstance (with its template) or an
// RBACPolicy.
type grantRef struct {
	Policy               bool
	Name                 string // the instance or the policy
	Template, InlineRole string // a ScopeInstance grant's
}

// objRef is an oria object an admin or D made.
type objRef struct {
	Kind  string // ScopeTemplate, ScopeInstance, RBACPolicy
	Name  string
	Grant int // the admin grant it belongs to, -1 for D's
}

// selectorKey is the label the victims' namespaces carry (its value is the
// run's prefix).
const selectorKey = "seqfuzz.oria.operatorframework.io/victim"

// A approves eligible requests (eligible.go); it has no other right.
var personas = []string{"D", "N", "C", "S", "V", "A"}

// NewWorld makes a run's namespaces, users and their RBAC: D may write
// oria's kinds and is admin of d, N is admin of n, C may write
// ClusterRoles, S may write oria's status, V holds nothing.
func NewWorld(ctx context.Context, e *Env, prefix string) (*World, error) {
	w := &World{env: e, Prefix: prefix, Users: map[string]string{}, Clients: map[string]client.Client{}}
	for _, p := range personas {
		w.Users[p] = prefix + "-" + strings.ToLower(p)
		c, err := e.As(w.Users[p])
		if err != nil {
			return nil, err
		}
		w.Clients[p] = c
	}
	var objs []client.Object
	for _, k := range namespaceKeys {
		objs = append(objs, w.namespace(k, k == "v1" || k == "v2"))
	}
	for p, role := range map[string]string{"D": roleOriaWriter, "C": roleRoleWriter, "S": roleStatusWriter} {
		objs = append(objs, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: w.Users[p]},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}, Subjects: []rbacv1.Subject{testutil.User(w.Users[p])}})
	}
	objs = append(objs, w.baseBinding("D", "d"), w.baseBinding("N", "n"), w.requesterBinding())
	for _, o := range objs {
		if err := e.Admin.Create(ctx, o); err != nil {
			return nil, fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	// The personas' RBAC reaches the authorizer (and the guard's cache)
	// asynchronously: wait for it, so that the first steps are judged on it.
	deadline := time.Now().Add(30 * time.Second)
	for _, a := range []testutil.Access{
		{User: w.Users["D"], Verb: "get", Group: "", Resource: "secrets", Namespace: w.NS("d")},
		{User: w.Users["N"], Verb: "get", Group: "", Resource: "secrets", Namespace: w.NS("n")},
		{User: w.Users["D"], Verb: "create", Group: oriav1alpha1.GroupVersion.Group, Resource: "scopeinstances"},
	} {
		for {
			ok, err := testutil.Allowed(ctx, e.Admin, a)
			if err == nil && ok {
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("the personas' RBAC did not take effect: %s", a)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	time.Sleep(500 * time.Millisecond) // the guard's RBAC cache, after the authorizer's
	return w, nil
}

// NS is the name of the namespace with key k (d, n, v1, v2).
func (w *World) NS(k string) string { return w.Prefix + "-" + k }

func (w *World) namespace(k string, labelled bool) *corev1.Namespace {
	var labels map[string]string
	if labelled {
		labels = map[string]string{selectorKey: w.Prefix}
	}
	return testutil.Namespace(w.NS(k), labels)
}

// baseBinding makes persona admin of namespace k.
func (w *World) baseBinding(persona, k string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: w.Prefix + "-base", Namespace: w.NS(k)},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects: []rbacv1.Subject{testutil.User(w.Users[persona])}}
}

// name returns a new name of the run for kind (at: admin template, ...).
func (w *World) name(kind string) string {
	w.seq++
	return fmt.Sprintf("%s-%s%d", w.Prefix, kind, w.seq)
}

// selector selects the victims' namespaces (labelled with the prefix).
func (w *World) selector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{selectorKey: w.Prefix}}
}

// grant resolves a step's grant index; ok is false when the run has none.
func (w *World) grant(i int) (int, grantRef, bool) {
	if len(w.Grants) == 0 {
		return 0, grantRef{}, false
	}
	i = ((i % len(w.Grants)) + len(w.Grants)) % len(w.Grants)
	return i, w.Grants[i], true
}

// instanceOf returns the ScopeInstance a grant binds through (a policy's
// compiled one, once oria made it: waits a few seconds).
func (w *World) instanceOf(ctx context.Context, g grantRef) (*oriav1alpha1.ScopeInstance, error) {
	name := g.Name
	if g.Policy {
		p := &oriav1alpha1.RBACPolicy{}
		deadline := time.Now().Add(5 * time.Second)
		for {
			err := w.env.Admin.Get(ctx, client.ObjectKey{Name: g.Name}, p)
			if err == nil && p.Status.ScopeInstanceName != "" {
				name = p.Status.ScopeInstanceName
				break
			}
			if time.Now().After(deadline) {
				return nil, errors.New("policy " + g.Name + " has no compiled instance")
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	si := &oriav1alpha1.ScopeInstance{}
	return si, w.env.Admin.Get(ctx, client.ObjectKey{Name: name}, si)
}

// gateName is the name of grant i's gate (computed as D would: from the
// instance's name and UID); "" when there is no such instance.
func (w *World) gateName(ctx context.Context, i int) string {
	_, g, ok := w.grant(i)
	if !ok {
		return ""
	}
	si, err := w.instanceOf(ctx, g)
	if err != nil {
		return ""
	}
	return binding.GateName(si.Name, string(si.UID))
}

// pickObject resolves an object index among the run's objects of kinds.
func (w *World) pickObject(i int, kinds ...string) (objRef, bool) {
	var of []objRef
	for _, o := range w.Objects {
		for _, k := range kinds {
			if o.Kind == k {
				of = append(of, o)
			}
		}
	}
	if len(of) == 0 {
		return objRef{}, false
	}
	return pick(of, i), true
}

// Cleanup removes what the run made (oria removes what it made for it);
// namespaces are deleted without waiting.
func (w *World) Cleanup(ctx context.Context) {
	a := w.env.Admin
	w.cleanupRequests(ctx)
	for _, l := range []client.ObjectList{&oriav1alpha1.RBACPolicyList{}, &oriav1alpha1.ScopeInstanceList{}, &oriav1alpha1.ScopeTemplateList{}} {
		if err := a.List(ctx, l); err != nil {
			continue
		}
		var items []client.Object
		switch l := l.(type) {
		case *oriav1alpha1.RBACPolicyList:
			for i := range l.Items {
				items = append(items, &l.Items[i])
			}
		case *oriav1alpha1.ScopeInstanceList:
			for i := range l.Items {
				items = append(items, &l.Items[i])
			}
		case *oriav1alpha1.ScopeTemplateList:
			for i := range l.Items {
				items = append(items, &l.Items[i])
			}
		}
		for _, o := range items {
			if strings.HasPrefix(o.GetName(), w.Prefix+"-") || w.ownsCompiled(o) {
				_ = a.Delete(ctx, o)
			}
		}
	}
	for _, k := range namespaceKeys {
		_ = a.Delete(ctx, testutil.Namespace(w.NS(k), nil))
	}
	for _, p := range personas {
		_ = a.Delete(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: w.Users[p]}})
	}
	var crbs rbacv1.ClusterRoleBindingList
	if err := a.List(ctx, &crbs); err == nil {
		for i := range crbs.Items {
			if strings.HasPrefix(crbs.Items[i].Name, w.Prefix+"-") {
				_ = a.Delete(ctx, &crbs.Items[i])
			}
		}
	}
	for _, r := range w.roles {
		if err := a.Delete(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: r}}); err != nil && !apierrors.IsNotFound(err) {
			continue
		}
	}
}

// ownsCompiled: a ScopeTemplate or ScopeInstance compiled from one of the
// run's policies (oria deletes those itself; this is belt and braces).
func (w *World) ownsCompiled(o client.Object) bool {
	return strings.HasPrefix(o.GetLabels()[oriav1alpha1.LabelRBACPolicy], w.Prefix+"-")
}
