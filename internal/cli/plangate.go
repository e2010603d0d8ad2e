package cli

import (
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/bundlerole"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/ownership"
)

// Gates (binding.Gated): a time-bound grant over many namespaces binds, in
// each of its namespaces, one ClusterRole of its own, its gate, instead of
// each of its template's roles. The gate exists, and is bound, from before
// the window (empty) until its end (filled while it is open); it is named
// after the instance's UID, so a plan names the gate of an instance not
// created yet by the instance alone (gatePlaceholder).

// gatePlaceholder stands for the name of the gate of an instance that does
// not exist yet, and bindingPlaceholder for that of its bindings.
func gatePlaceholder(instance string) string { return "(gate of ScopeInstance " + instance + ")" }

func bindingPlaceholder(instance string) string {
	return "(binding of the gate of ScopeInstance " + instance + ")"
}

// instanceUID returns the UID of the cluster's instance of this name: a
// planned instance of that name updates it, and keeps its UID. An instance
// not created yet has none (a dry run's UID is not the one a create gets).
func (p *planner) instanceUID(name string) (types.UID, bool) {
	for i := range p.st.Instances {
		if si := &p.st.Instances[i]; si.Name == name && si.UID != "" {
			return si.UID, true
		}
	}
	return "", false
}

// gatesOf returns the cluster's gates of the instance of this name: oria's
// ClusterRoles labelled with it, not a template's, controlled by it (or by
// nothing, once the garbage collector removed the reference).
func (p *planner) gatesOf(name string) []*rbacv1.ClusterRole {
	var out []*rbacv1.ClusterRole
	for i := range p.st.ClusterRoles {
		cr := &p.st.ClusterRoles[i]
		l := cr.Labels
		if ownership.IsManaged(cr) && l[oriav1alpha1.LabelScopeInstance] == names.LabelValue(name) && l[oriav1alpha1.LabelScopeTemplate] == "" &&
			ownership.NotControlledByOther(cr, ownership.KindScopeInstance, name) {
			out = append(out, cr)
		}
	}
	return out
}

// deleteGates records the deletion of gates, except the one named keep.
func (p *planner) deleteGates(owner string, gates []*rbacv1.ClusterRole, keep string) {
	for _, g := range gates {
		if g.Name != keep {
			p.change(Change{Action: ActionDelete, Kind: "ClusterRole", Name: g.Name, Owner: owner, Detail: formatRules(grantedBy(g))})
		}
	}
}

// gateWindow is what the window of a gated instance means for its plan:
// whether it binds its gate (pending or open), and whether the gate holds
// rules (open), with a note (a pending gate's is completed by fill, with
// the rules it will hold).
func (p *planner) gateWindow(si *oriav1alpha1.ScopeInstance, g *gatedPlan) (binds, open bool) {
	g.pendingNote = -1
	win := binding.InstanceWindow(si.Spec)
	w := windowOf(win, p.st.Now)
	who := "ScopeInstance " + si.Name
	if policy := ownership.ControllerName(si.OwnerReferences, ownership.KindRBACPolicy); policy != "" {
		who = "RBACPolicy " + policy
	}
	if p.emptyWindow(who, win) {
		return false, false
	}
	switch w.State {
	case WindowPending:
		g.notBefore = w.NotBefore
		end := ", and keeps them (no spec.expiresAt)"
		if w.ExpiresAt != nil {
			end = ", and empties it at " + binding.Stamp(w.ExpiresAt) + " (spec.expiresAt)"
		}
		g.pendingNote = len(p.report.Notes)
		p.note("%s is time-bound and pending, %s: its bindings are made now, to %s, which holds no rule until %s (spec.notBefore); "+
			"oria fills it then with the rules of its ScopeTemplate's roles%s", who, w.Description, g.describe, binding.Stamp(w.NotBefore), end)
		return true, false
	case WindowExpired:
		p.note("%s %s (spec.expiresAt): it grants nothing; its gate is emptied, then its bindings and the gate are deleted", who, w.Description)
		return false, false
	}
	if w.ExpiresAt != nil {
		p.note("%s is time-bound: it grants %s, through %s; oria empties the gate then, and deletes its bindings and the gate", who, w.Description, g.describe)
	}
	return true, true
}

// emptyWindow notes, and reports, a window that never opens: its
// expiresAt is not after its notBefore (the API server refuses it).
func (p *planner) emptyWindow(who string, w binding.Window) bool {
	if !w.Empty() {
		return false
	}
	w = w.Whole()
	p.note("%s never grants: spec.expiresAt (%s) is not after spec.notBefore (%s)", who, binding.Stamp(w.ExpiresAt), binding.Stamp(w.NotBefore))
	return true
}

// gatedChanges records the changes of a gated instance inside its window,
// or before it (pending): its gate, then a RoleBinding to the gate in each
// target namespace; every other binding and gate of the instance goes.
func (p *planner) gatedChanges(si *oriav1alpha1.ScopeInstance, gated gatedPlan, existing []client.Object) {
	owner := "ScopeInstance " + si.Name
	subj := gated.template.Spec.BindingTemplate.Subjects
	if !gated.known {
		want := binding.RoleBindings(si, gated.template.Name, []string{gated.gate}, subj, gated.targets.Namespaces)
		for _, b := range want {
			b.Name = bindingPlaceholder(si.Name)
		}
		p.note("ScopeInstance %s does not exist yet: a time-bound grant over many namespaces binds, in each of them, one ClusterRole "+
			"of its own per instance, its gate, which holds the rules of its ScopeTemplate's roles while the window is open and none "+
			"outside it; the gate and its bindings are named after the instance's UID (oria-window-%s-<hash of the UID>), known once it is created",
			si.Name, si.Name)
		p.change(Change{Action: ActionCreate, Kind: "ClusterRole", Name: gated.gate, Owner: owner, Detail: gateDetail(gated)})
		p.diff(owner, binding.Objects(want), existing, existing)
		p.deleteGates(owner, gated.gates, "")
		return
	}
	var want []client.Object
	switch have := p.roles[gated.gate]; {
	case p.gateConflict(gated):
		p.note("ScopeInstance %s: ClusterRole %s, its gate, exists and was not created by oria for it: nothing is bound", si.Name, gated.gate)
	case have == nil:
		p.change(Change{Action: ActionCreate, Kind: "ClusterRole", Name: gated.gate, Owner: owner, Detail: gateDetail(gated)})
	case !equality.Semantic.DeepEqual(have.Rules, gated.want.Rules) || have.AggregationRule != nil ||
		have.Annotations[oriav1alpha1.AnnotationGateRoles] != gated.want.Annotations[oriav1alpha1.AnnotationGateRoles]:
		p.change(Change{Action: ActionUpdate, Kind: "ClusterRole", Name: gated.gate, Owner: owner, Detail: gateDetail(gated)})
	default:
		p.report.Unchanged++
	}
	if !p.gateConflict(gated) {
		inst := si.DeepCopy()
		inst.UID = gated.uid
		want = binding.Objects(binding.RoleBindings(inst, gated.template.Name, []string{gated.gate}, subj, gated.targets.Namespaces))
	}
	p.diff(owner, want, existing, binding.Stale(existing, binding.Keep(si.Name, want, gated.targets, nil), gated.targets))
	p.deleteGates(owner, gated.gates, gated.gate)
}

// gateConflict reports whether the gate's name is held by a role that is
// not this instance's gate.
func (p *planner) gateConflict(g gatedPlan) bool {
	have := p.roles[g.gate]
	return have != nil && (!ownership.IsManaged(have) || !ownership.ControlledByUID(have, g.uid))
}

// gateDetail describes a planned gate's rules: a pending gate's, none
// until notBefore, and those it holds from then.
func gateDetail(g gatedPlan) string {
	if !ownership.GateGrants(g.want) && g.later != nil && g.notBefore != nil {
		return "no rule until " + binding.Stamp(g.notBefore) + ", then " + formatRules(grantedBy(g.later))
	}
	return formatRules(grantedBy(g.want))
}

// grantedBy returns the rules of a gate less its seal (ownership.GateSeal),
// which grants nothing: what its bindings grant.
func grantedBy(gate *rbacv1.ClusterRole) []rbacv1.PolicyRule {
	return slices.DeleteFunc(slices.Clone(gate.Rules), ownership.IsGateSeal)
}

// gatedPlan is what the plan of a gated instance is built from.
type gatedPlan struct {
	template *oriav1alpha1.ScopeTemplate
	targets  binding.Targets
	// gate is the gate's name (gatePlaceholder when the instance does not
	// exist yet: known false; uid is its UID otherwise); want the gate as
	// oria writes it.
	gate  string
	want  *rbacv1.ClusterRole
	known bool
	uid   types.UID
	// describe names the gate in a note.
	describe string
	// gates are the cluster's gates of the instance.
	gates []*rbacv1.ClusterRole
	// A pending gate: later is the gate as oria fills it at notBefore;
	// pendingNote the index of the note fill completes (-1: none).
	later       *rbacv1.ClusterRole
	notBefore   *metav1.Time
	pendingNote int
}

// planGate names the gate of a gated instance: after its UID when the
// instance exists, else by the instance alone.
func (p *planner) planGate(si *oriav1alpha1.ScopeInstance) gatedPlan {
	g := gatedPlan{gates: p.gatesOf(si.Name)}
	uid, known := p.instanceUID(si.Name)
	g.known, g.uid = known, uid
	g.gate, g.describe = gatePlaceholder(si.Name), "its gate, a ClusterRole of its own"
	if known {
		g.gate = binding.GateName(si.Name, string(uid))
		g.describe = "its gate, ClusterRole " + g.gate
	}
	return g
}

// fill completes g with the gate oria writes, once the template and the
// targets are resolved.
func (g *gatedPlan) fill(p *planner, si *oriav1alpha1.ScopeInstance, t *oriav1alpha1.ScopeTemplate, targets binding.Targets, roles []string, open bool) {
	g.template, g.targets = t, targets
	inst := si.DeepCopy()
	inst.UID = g.uid
	// As the ScopeInstance controller copies them (never an error here:
	// the cluster's roles are in the snapshot).
	sources, _ := binding.GateSources(t, roles, func(name string) ([]rbacv1.PolicyRule, error) {
		if have := p.roles[name]; have != nil {
			return have.Rules, nil
		}
		return nil, nil
	})
	g.want = binding.GateRole(inst, sources, open)
	g.want.Name = g.gate
	if open {
		return
	}
	g.later = binding.GateRole(inst, sources, true)
	g.later.Name = g.gate
	if g.pendingNote >= 0 {
		rules := make([]string, 0, len(g.later.Rules))
		for _, r := range grantedBy(g.later) {
			rules = append(rules, bundlerole.FormatRule(r))
		}
		what := ": " + strings.Join(rules, "; ")
		switch {
		case p.unread(ListClusterRoles):
			what = " (" + p.requester() + " may not list clusterroles: the rules of its roles that are not inline are unknown)" + what
		case len(rules) == 0:
			what = ", which grant nothing"
		}
		p.report.Notes[g.pendingNote] += what
	}
}
