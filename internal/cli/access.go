package cli

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/record"
)

// Access levels. A level is reached when every verb of it and of the levels
// below is allowed: view = get, list, watch; edit = view + create, update,
// patch, delete; admin = edit + deletecollection (the generated -admin role
// grants every verb, -edit does not grant deletecollection). Verbs that are
// not exactly a level's are LevelPartial (with the highest level they hold
// all of as the row's Base): the level always follows the verbs held.
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
	// Binding is the binding: "RoleBinding <namespace>/<name>" or
	// "ClusterRoleBinding <name>".
	Binding string
	// APIs are the CRD names of the APIs the binding's role has a rule on.
	APIs []string
	// Controller is set for a Kubernetes controller (a system: user or a
	// kube-system ServiceAccount) bound by Kubernetes' default policy (a
	// binding labelled kubernetes.io/bootstrapping=rbac-defaults), which
	// reports leave out unless asked.
	Controller bool
	// Window is the window of the time-bound grant an oria binding is for
	// (nil without one); Via says it too: until when, or that the binding
	// is still in place out of its window.
	Window *GrantWindow
}

// LabelBootstrapping marks the roles and bindings of Kubernetes' default
// RBAC policy (value rbac-defaults).
const LabelBootstrapping = "kubernetes.io/bootstrapping"

// controller reports whether sub, bound by b, is one of Kubernetes' own
// controllers: a system: user or a kube-system ServiceAccount bound by the
// default policy. Groups (system:masters, system:authenticated...) are
// never hidden: a binding to one reaches people.
func controller(b *metav1.ObjectMeta, sub rbacv1.Subject) bool {
	if b.Labels[LabelBootstrapping] != "rbac-defaults" {
		return false
	}
	switch sub.Kind {
	case rbacv1.UserKind:
		return strings.HasPrefix(sub.Name, "system:")
	case rbacv1.ServiceAccountKind:
		return sub.Namespace == "kube-system"
	}
	return false
}

// WithoutControllers returns cands without Kubernetes' own controllers.
func WithoutControllers(cands []Candidate) []Candidate {
	return slices.DeleteFunc(slices.Clone(cands), func(c Candidate) bool { return c.Controller })
}

// legacyRoles are the built-in roles generated roles aggregate into in
// Legacy mode.
var legacyRoles = map[string]bool{"admin": true, "edit": true, "view": true}

// Candidates returns the subjects of every binding whose role has a rule
// on one of apis (an aggregated role included: its rules are the union the
// aggregation controller wrote), sorted. Only RoleBindings in namespace
// count when it is set.
func Candidates(s *Snapshot, apis []API, namespace string) []Candidate {
	covers := func(rules []rbacv1.PolicyRule) []string {
		var out []string
		for _, api := range apis {
			for _, r := range rules {
				if (slices.Contains(r.APIGroups, api.Group) || slices.Contains(r.APIGroups, "*")) &&
					(slices.Contains(r.Resources, api.Resource) || slices.Contains(r.Resources, "*")) && len(r.Verbs) > 0 {
					out = append(out, api.CRD)
					break
				}
			}
		}
		return out
	}
	clusterRoles := map[string][]string{}
	for _, cr := range s.ClusterRoles {
		clusterRoles[cr.Name] = covers(cr.Rules)
	}
	roles := map[string][]string{}
	for _, r := range s.Roles {
		roles[r.Namespace+"/"+r.Name] = covers(r.Rules)
	}
	instances := map[string]*oriav1alpha1.ScopeInstance{}
	for i := range s.Instances {
		instances[s.Instances[i].Name] = &s.Instances[i]
	}
	granters := map[string]string{} // RBACPolicy name -> who granted it
	for _, p := range s.Policies {
		granters[p.Name] = record.Grant.Of(p.Annotations).By
	}
	// An activation's via names its AccessRequest's requester and approver.
	for _, r := range s.Requests {
		granters[ownership.KindAccessRequest+"/"+r.Name] = fmt.Sprintf(" requested by %q, approved by %q", r.Spec.Requester, r.Status.ApprovedBy)
	}
	var out []Candidate
	for _, b := range s.ClusterRoleBindings {
		if covered := clusterRoles[b.RoleRef.Name]; b.RoleRef.Kind == "ClusterRole" && len(covered) > 0 {
			via, window := via("ClusterRoleBinding", &b.ObjectMeta, b.RoleRef, instances, granters, s.Now)
			for _, sub := range b.Subjects {
				out = append(out, Candidate{Subject: sub, Via: via, Binding: "ClusterRoleBinding " + b.Name, APIs: covered,
					Controller: controller(&b.ObjectMeta, sub), Window: window})
			}
		}
	}
	for _, b := range s.RoleBindings {
		if namespace != "" && b.Namespace != namespace {
			continue
		}
		covered := clusterRoles[b.RoleRef.Name]
		if b.RoleRef.Kind == "Role" {
			covered = roles[b.Namespace+"/"+b.RoleRef.Name]
		}
		if len(covered) > 0 && (b.RoleRef.Kind == "ClusterRole" || b.RoleRef.Kind == "Role") {
			via, window := via("RoleBinding", &b.ObjectMeta, b.RoleRef, instances, granters, s.Now)
			for _, sub := range b.Subjects {
				if sub.Kind == rbacv1.ServiceAccountKind && sub.Namespace == "" {
					sub.Namespace = b.Namespace
				}
				out = append(out, Candidate{Subject: sub, Namespace: b.Namespace, Via: via, APIs: covered,
					Binding: "RoleBinding " + b.Namespace + "/" + b.Name, Controller: controller(&b.ObjectMeta, sub), Window: window})
			}
		}
	}
	slices.SortFunc(out, func(a, b Candidate) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(SubjectString(a.Subject), SubjectString(b.Subject)),
			cmp.Compare(a.Via, b.Via), cmp.Compare(a.Binding, b.Binding))
	})
	return slices.CompactFunc(out, func(a, b Candidate) bool {
		return a.Subject == b.Subject && a.Namespace == b.Namespace && a.Via == b.Via && a.Binding == b.Binding
	})
}

// via names what a binding is: oria's binding for a ScopeInstance (of an
// RBACPolicy), a binding to a built-in role the extension's roles aggregate
// into (Legacy), or a binding someone made. For oria's binding of a
// time-bound grant it returns the grant's window at now too, and the via
// says until when (or that the binding is in place out of its window).
func via(kind string, b *metav1.ObjectMeta, ref rbacv1.RoleRef, instances map[string]*oriav1alpha1.ScopeInstance, granters map[string]string, now time.Time) (string, *GrantWindow) {
	name := b.Name
	if b.Namespace != "" {
		name = b.Namespace + "/" + b.Name
	}
	if ownership.IsManaged(b) {
		if si := ownership.ControllerName(b.OwnerReferences, ownership.KindScopeInstance); si != "" {
			inst, ok := instances[si]
			if !ok {
				return "ScopeInstance " + si, nil
			}
			w := windowOf(binding.InstanceWindow(inst.Spec), now)
			note := viaNote(w)
			if ref.Kind == "ClusterRole" && ref.Name == binding.GateName(inst.Name, string(inst.UID)) {
				note = gateViaNote(w, ref.Name)
			}
			if ar := ownership.ControllerName(inst.OwnerReferences, ownership.KindAccessRequest); ar != "" {
				return "AccessRequest " + ar + note + granters[ownership.KindAccessRequest+"/"+ar], w
			}
			if p := ownership.ControllerName(inst.OwnerReferences, ownership.KindRBACPolicy); p != "" {
				return "RBACPolicy " + p + note + viaGranter(granters[p]), w
			}
			return "ScopeInstance " + si + note + viaGranter(record.Grant.Of(inst.Annotations).By), w
		}
	}
	if ref.Kind == "ClusterRole" && legacyRoles[ref.Name] {
		return fmt.Sprintf("Legacy aggregation: %s %s -> %s", kind, name, ref.Name), nil
	}
	return fmt.Sprintf("%s %s -> %s %s", kind, name, ref.Kind, ref.Name), nil
}

// viaGranter is what a via adds for a grant whose record says who granted
// it ("" when none does).
func viaGranter(user string) string {
	if user == "" {
		return ""
	}
	return fmt.Sprintf(" granted by %q", user)
}

// gateViaNote is viaNote for a binding to the gate of a time-bound grant
// (binding.Gated): its bindings are in place from before the window to its
// end, and the gate's rules are what grants; a binding found to give
// access out of the window means the gate still holds rules.
func gateViaNote(w *GrantWindow, gate string) string {
	if w != nil && (w.State == WindowExpired || w.State == WindowPending) {
		state := w.Description
		if w.State == WindowPending {
			state = "pending, " + state
		}
		return " (" + state + ": its gate, ClusterRole " + gate + ", still holds rules: oria has not emptied it yet)"
	}
	return viaNote(w)
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
	Namespace string `json:"namespace"`
	API       string `json:"api"`
	// Extension is the API's ClusterExtension (the reverse lookup).
	Extension string `json:"extension,omitempty"`
	// Level is view, edit or admin when Verbs are exactly that level's,
	// else partial, with Base the highest level all of whose verbs are held.
	Level string   `json:"level"`
	Base  string   `json:"base,omitempty"`
	Verbs []string `json:"verbs"`
	Via   []string `json:"via"`
	// Bindings are the bindings behind Via.
	Bindings []string `json:"bindings,omitempty"`
	// ExpiresAt is when the access ends, when every Via is a time-bound
	// grant with an end (the latest of them); absent when one has none.
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
}
