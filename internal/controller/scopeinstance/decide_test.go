package scopeinstance

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
)

// decided is what a test reads of a plan: the action, the spec error, the
// gate's action and whether it grants, the bindings wanted and revoked (by
// namespace>role), what waits, and the pins.
type decided struct {
	Action   action
	SpecErr  string
	Gate     gateOp
	Filled   bool
	Conflict bool
	Want     []string
	Revoke   []string
	Pending  []string
	Ahead    []string
	Deferred int
	Pins     map[string]string
	// Emptied: at the expiry, the gate's emptied form is planned (a
	// gate that holds rules).
	Emptied bool
	// Unbound are the namespaces a pending role, or a role ahead, leaves
	// not fully bound.
	Unbound []string
}

func decidedOf(p *plan) decided {
	d := decided{Action: p.action, Gate: p.gate.op, Filled: p.gate.filled(), Conflict: p.gate.conflict != "", Want: bindingKeys(p.want), Revoke: bindingKeys(p.revoke),
		Pending: p.pending, Ahead: p.ahead, Deferred: p.deferred, Pins: p.pins, Emptied: p.gate.op == gateEnd && p.gate.want != nil}
	for _, ns := range p.targets.Namespaces {
		if p.unbound[ns] {
			d.Unbound = append(d.Unbound, ns)
		}
	}
	if p.specErr != nil {
		d.SpecErr = p.specErr.Reason
	}
	return d
}

func bindingKeys(s binding.Set) []string {
	var out []string
	for _, b := range s.Objects() {
		out = append(out, b.GetNamespace()+">"+binding.RoleOf(b))
	}
	return out
}

// TestDecide: one plan from what was gathered, the window judged at the
// instant passed in: what to write and revoke, and the gate's action in
// its order.
func TestDecide(t *testing.T) {
	viewRule := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}
	tmpl := &oriav1alpha1.ScopeTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}, Spec: oriav1alpha1.ScopeTemplateSpec{
		BindingTemplate: oriav1alpha1.BindingTemplate{Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "devs"}}},
		ClusterRoles:    []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}}}
	inlineTmpl := tmpl.DeepCopy()
	inlineTmpl.Spec.ClusterRoles = append(inlineTmpl.Spec.ClusterRoles, oriav1alpha1.ClusterRoleTemplate{Name: "t-inline", Rules: viewRule})
	nss := []binding.Namespace{{Name: "a", UID: "uid-a"}, {Name: "b", UID: "uid-b"}, {Name: "c", UID: "uid-c"}}
	instance := func(spec oriav1alpha1.ScopeInstanceSpec) *oriav1alpha1.ScopeInstance {
		spec.ScopeTemplateName = "t"
		return &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "si", UID: "si-uid", Generation: 1}, Spec: spec}
	}
	listed := instance(oriav1alpha1.ScopeInstanceSpec{Namespaces: []string{"a", "b"}})
	rbs := func(si *oriav1alpha1.ScopeInstance, role string, ns ...string) []*rbacv1.RoleBinding {
		return binding.RoleBindings(si, "t", []string{role}, tmpl.Spec.BindingTemplate.Subjects, ns)
	}
	expired := instance(oriav1alpha1.ScopeInstanceSpec{Namespaces: []string{"a", "b"}, ExpiresAt: at(-time.Second)})
	expired.Status.NamespaceUIDs = map[string]string{"a": "uid-a"}
	pending := instance(oriav1alpha1.ScopeInstanceSpec{Namespaces: []string{"a"}, NotBefore: at(time.Hour)})
	selector := &metav1.LabelSelector{}
	gatedOpen := instance(oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: selector, ExpiresAt: at(time.Hour)})
	gatedPending := instance(oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: selector, NotBefore: at(time.Hour)})
	ungated := instance(oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: selector})
	gate := func(si *oriav1alpha1.ScopeInstance, open bool) *rbacv1.ClusterRole {
		g := binding.GateRole(si, []binding.GateSource{{Name: "view", Rules: viewRule}}, open)
		g.UID = "gate-uid"
		return g
	}
	live := map[string][]rbacv1.PolicyRule{"view": viewRule}
	for _, tc := range []struct {
		name string
		g    gathered
		want decided
	}{{
		name: "expired: every binding goes, the gate emptied first and deleted last, nothing else read",
		g:    gathered{si: expired, existing: binding.Set{RoleBindings: rbs(expired, "view", "a", "b")}, gate: gate(expired, true)},
		want: decided{Action: revokeAll, Gate: gateEnd, Emptied: true, Revoke: []string{"a>view", "b>view"}, Pins: map[string]string{"a": "uid-a"}},
	}, {
		name: "expired, its gate emptied already: nothing to empty, the bindings go, then the gate",
		g:    gathered{si: expired, existing: binding.Set{RoleBindings: rbs(expired, "view", "a")}, gate: gate(expired, false)},
		want: decided{Action: revokeAll, Gate: gateEnd, Revoke: []string{"a>view"}, Pins: map[string]string{"a": "uid-a"}},
	}, {
		name: "pending: nothing bound before notBefore, the listed namespaces pinned",
		g:    gathered{si: pending, namespaces: nss},
		want: decided{Action: revokeAll, Pins: map[string]string{"a": "uid-a"}},
	}, {
		name: "open: the wanted bindings, the stale one revoked",
		g:    gathered{si: listed, namespaces: nss, template: tmpl, existing: binding.Set{RoleBindings: rbs(listed, "view", "c")}},
		want: decided{Action: bindAll, Want: []string{"a>view", "b>view"}, Revoke: []string{"c>view"},
			Pins: map[string]string{"a": "uid-a", "b": "uid-b"}},
	}, {
		name: "no template: a spec error revokes everything (fail closed)",
		g:    gathered{si: listed, namespaces: nss, existing: binding.Set{RoleBindings: rbs(listed, "view", "a")}},
		want: decided{Action: revokeOnly, SpecErr: oriav1alpha1.ReasonTemplateNotFound, Revoke: []string{"a>view"},
			Pins: map[string]string{"a": "uid-a", "b": "uid-b"}},
	}, {
		name: "its ServiceAccount missing: nothing new, only what the spec no longer allows goes",
		g: gathered{si: func() *oriav1alpha1.ScopeInstance {
			si := listed.DeepCopy()
			si.Spec.ServiceAccount = &oriav1alpha1.ServiceAccountReference{Namespace: "ns", Name: "sa"}
			return si
		}(), serviceAccountMissing: true, namespaces: nss, template: tmpl, existing: binding.Set{RoleBindings: append(rbs(listed, "view", "a", "c"), rbs(listed, "edit", "b")...)}},
		want: decided{Action: revokeOnly, SpecErr: oriav1alpha1.ReasonServiceAccountNotFound, Revoke: []string{"c>view", "b>edit"},
			Pins: map[string]string{"a": "uid-a", "b": "uid-b"}},
	}, {
		name: "an inline role not created yet: pending, its bindings not made",
		g: gathered{si: listed, namespaces: nss, template: inlineTmpl, inline: map[string]inlineRole{"t-inline": {state: rolePending}},
			existing: binding.Set{RoleBindings: rbs(listed, "t-inline", "a")}},
		want: decided{Action: bindAll, Want: []string{"a>view", "b>view"}, Pending: []string{"t-inline"}, Unbound: []string{"b"},
			Pins: map[string]string{"a": "uid-a", "b": "uid-b"}},
	}, {
		name: "an inline role whose rules lag: no new binding of it, the existing one kept",
		g: gathered{si: listed, namespaces: nss, template: inlineTmpl, inline: map[string]inlineRole{"t-inline": {state: roleReady}},
			existing: binding.Set{RoleBindings: rbs(listed, "t-inline", "a")}},
		want: decided{Action: bindAll, Want: []string{"a>t-inline", "a>view", "b>view"}, Ahead: []string{"t-inline"}, Deferred: 1, Unbound: []string{"b"},
			Pins: map[string]string{"a": "uid-a", "b": "uid-b"}},
	}, {
		name: "gated, no gate yet: created first, filled inside the window",
		g:    gathered{si: gatedOpen, namespaces: nss, template: tmpl, live: live},
		want: decided{Action: bindAll, Gate: gateCreate, Filled: true, Want: gateKeys(gatedOpen, "a", "b", "c")},
	}, {
		name: "gated, before the window, its gate exists: written first, empty",
		g:    gathered{si: gatedPending, namespaces: nss, template: tmpl, live: live, gate: gate(gatedPending, true)},
		want: decided{Action: bindAll, Gate: gateNarrow, Want: gateKeys(gatedPending, "a", "b", "c")},
	}, {
		name: "gated, inside the window, its gate exists: filled after its bindings",
		g:    gathered{si: gatedOpen, namespaces: nss, template: tmpl, live: live, gate: gate(gatedOpen, false)},
		want: decided{Action: bindAll, Gate: gateFill, Filled: true, Want: gateKeys(gatedOpen, "a", "b", "c")},
	}, {
		name: "gated, its gate's name held by someone else: nothing bound",
		g:    gathered{si: gatedOpen, namespaces: nss, template: tmpl, live: live, squat: "ClusterRole held"},
		want: decided{Action: bindAll, Conflict: true},
	}, {
		name: "no longer gated, a gate left: its bindings replaced, then it goes last",
		g: gathered{si: ungated, namespaces: nss, template: tmpl, gate: gate(ungated, true),
			existing: binding.Set{RoleBindings: binding.RoleBindings(ungated, "t", []string{binding.GateName("si", "si-uid")}, nil, []string{"a"})}},
		want: decided{Action: bindAll, Gate: gateDelete, Want: []string{"a>view", "b>view", "c>view"},
			Revoke: []string{"a>" + binding.GateName("si", "si-uid")}},
	}, {
		name: "gated with a spec error: the gate narrowed first to what the spec allows (no template: nothing)",
		g:    gathered{si: gatedOpen, namespaces: nss, live: live, gate: gate(gatedOpen, true)},
		want: decided{Action: revokeOnly, SpecErr: oriav1alpha1.ReasonTemplateNotFound, Gate: gateNarrow},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.g.now = t0
			if d := cmp.Diff(tc.want, decidedOf(decide(tc.g))); d != "" {
				t.Errorf("plan (-want +got):\n%s", d)
			}
		})
	}
}

// gateKeys are the keys of the RoleBindings of si's gate in namespaces.
func gateKeys(si *oriav1alpha1.ScopeInstance, namespaces ...string) []string {
	name := binding.GateName(si.Name, string(si.UID))
	return bindingKeys(binding.Set{RoleBindings: binding.RoleBindings(si, "t", []string{name}, nil, namespaces)})
}

// TestBeyondCeiling: with a spec error, a binding whose recorded ceiling
// is not what its role grants now goes; one of a role that does not exist
// stays.
func TestBeyondCeiling(t *testing.T) {
	rb := func(role, rec string) *rbacv1.RoleBinding {
		b := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "b-" + role}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: role}}
		if rec != "" {
			b.Annotations = map[string]string{oriav1alpha1.AnnotationCeilingRules: rec}
		}
		return b
	}
	g := gathered{existing: binding.Set{RoleBindings: []*rbacv1.RoleBinding{rb("same", "h1"), rb("changed", "h1"), rb("gone", "h1")}},
		ceilings: map[string]string{"same": "h1", "changed": "h2", "gone": binding.CeilingAbsent}}
	var got []string
	for _, b := range beyondCeiling(g).Objects() {
		got = append(got, client.ObjectKeyFromObject(b).String())
	}
	if d := cmp.Diff([]string{"a/b-changed"}, got); d != "" {
		t.Errorf("beyond the ceiling (-want +got):\n%s", d)
	}
}
