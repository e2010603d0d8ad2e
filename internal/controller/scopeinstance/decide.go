package scopeinstance

import (
	"fmt"
	"slices"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/publish"
)

// gathered is what Gather read for one reconcile (gather.go): the instance,
// the instant and the state of the cluster it is decided on. decide turns
// it into the plan; it reads nothing.
type gathered struct {
	si      *oriav1alpha1.ScopeInstance
	now     time.Time
	recheck time.Duration
	// namespaces are the cluster's namespaces (read when the instance
	// binds in namespaces, or is pending).
	namespaces []binding.Namespace
	// template is the instance's ScopeTemplate, nil when it does not exist
	// (or was not read: outside the window).
	template *oriav1alpha1.ScopeTemplate
	// inline are the inline roles of a valid template as the cluster has
	// them.
	inline map[string]inlineRole
	// serviceAccountMissing: the ceiling's ServiceAccount does not exist.
	serviceAccountMissing bool
	// gate is oria's gate of the instance (nil: none), squat the role that
	// holds its name instead ("" when none).
	gate  *rbacv1.ClusterRole
	squat string
	// live are the rules of the roles a gate copies, as the cluster has
	// them (absent: the role does not exist).
	live map[string][]rbacv1.PolicyRule
	// existing are the instance's cached bindings.
	existing binding.Set
	// ceilings are the ceiling values (binding.CeilingHash, or
	// binding.CeilingAbsent) of the roles that are not a valid template's
	// inline roles, for an instance with a ceiling.
	ceilings map[string]string
}

// inlineRole is an inline role of the template as the cluster has it.
type inlineRole struct {
	state roleState
	// rules are the rules it has now (roleReady).
	rules []rbacv1.PolicyRule
}

type roleState int

const (
	roleReady roleState = iota
	rolePending
	roleConflict
)

// decide turns what was gathered into the plan. It is pure: what it
// reads is in g, the instant too.
func decide(g gathered) *plan {
	si := g.si
	w := binding.InstanceWindow(si.Spec)
	phase, _ := w.At(g.now)
	p := &plan{recheck: g.recheck, now: g.now, window: w, phase: phase, priority: instantPriority(si.Spec),
		cluster: binding.IsClusterWide(si.Spec), hasCeiling: si.Spec.ServiceAccount != nil,
		pins: si.Status.NamespaceUIDs, pinnedFor: si.Status.PinnedFor, existing: g.existing, template: g.template}
	bind := binds(si.Spec, phase)
	var recreated []string
	if bind || (phase == binding.WindowPending && !p.cluster) {
		// The window opens on the namespaces the spec was admitted for.
		p.pins, recreated = binding.PinNamespaces(si.Spec.Namespaces, g.namespaces, si.Status.NamespaceUIDs, binding.Repin(si))
		p.pinnedFor = binding.PinKey(si.Spec)
	}
	if !bind {
		p.action, p.revoke = revokeAll, g.existing
		if g.gate != nil {
			p.gate = gatePlan{op: gateEnd, cur: g.gate, want: binding.EmptiedGate(g.gate)}
		}
		return p
	}
	if p.targets, p.specErr = specError(g, recreated); p.specErr != nil {
		p.action = revokeOnly
		decideRevokeOnly(g, p, recreated)
		return p
	}
	decideBind(g, p)
	return p
}

// specError returns the spec error of the instance (nil: none), in the
// order the user would fix them, and otherwise its targets.
func specError(g gathered, recreated []string) (binding.Targets, *binding.SpecError) {
	si, t := g.si, g.template
	if _, serr := binding.Selector(si.Spec); serr != nil {
		return binding.Targets{}, serr
	}
	if t == nil {
		return binding.Targets{}, &binding.SpecError{Reason: oriav1alpha1.ReasonTemplateNotFound, Message: fmt.Sprintf(
			"ScopeTemplate %q does not exist: nothing is granted (its bindings are removed) until it does", si.Spec.ScopeTemplateName)}
	}
	if serr := binding.ValidateTemplate(t); serr != nil {
		return binding.Targets{}, &binding.SpecError{Reason: oriav1alpha1.ReasonTemplateInvalid, Message: fmt.Sprintf(
			"ScopeTemplate %q is not valid (%s: %s); existing bindings are kept until it is fixed", t.Name, serr.Reason, serr.Message)}
	}
	targets := binding.Targets{Cluster: true}
	if binding.IsClusterWide(si.Spec) {
		if serr := binding.ValidateClusterSubjects(t.Spec.BindingTemplate.Subjects); serr != nil {
			serr.Message = fmt.Sprintf("ScopeTemplate %q: %s", t.Name, serr.Message)
			return binding.Targets{}, serr
		}
	} else {
		resolved, serr := binding.ResolveTargets(si.Spec, g.namespaces)
		if serr != nil {
			return binding.Targets{}, serr
		}
		targets = resolved.Without(recreated)
	}
	if sa := si.Spec.ServiceAccount; sa != nil && g.serviceAccountMissing {
		return targets, &binding.SpecError{Reason: oriav1alpha1.ReasonServiceAccountNotFound, Message: fmt.Sprintf(
			"ServiceAccount %q in namespace %q (spec.serviceAccount) does not exist; nothing new is bound until it does, existing bindings are kept",
			sa.Name, sa.Namespace)}
	}
	if err := publish.Validate(si.Spec.Publication); err != nil {
		return targets, &binding.SpecError{Reason: oriav1alpha1.ReasonInvalidSpec, Message: err.Error() + "; nothing is changed until it is fixed"}
	}
	return targets, nil
}

// decideBind decides the bindings of an instance with a valid spec, inside
// its window (or gated before it: bound to its empty gate).
func decideBind(g gathered, p *plan) {
	si, t := g.si, g.template
	for _, role := range binding.Roles(t) {
		if !role.Inline {
			p.roles = append(p.roles, role.Name)
			continue
		}
		switch in := g.inline[role.Name]; in.state {
		case roleReady:
			p.roles = append(p.roles, role.Name)
			if !equality.Semantic.DeepEqual(in.rules, role.Rules) {
				p.ahead = append(p.ahead, role.Name)
			}
		case rolePending:
			p.pending = append(p.pending, role.Name)
		case roleConflict:
			p.conflicted = append(p.conflicted, role.Name)
		}
	}
	subj := t.Spec.BindingTemplate.Subjects
	p.want = binding.Bindings(si, t.Name, p.roles, subj, p.targets)
	switch {
	case binding.Gated(si.Spec):
		decideGate(g, p)
	case g.gate != nil:
		// No longer gated: the bindings replacing its own are made first,
		// then its own are deleted, then the gate.
		p.gate = gatePlan{op: gateDelete, cur: g.gate}
	}
	p.deferAhead()
	if !p.targets.Cluster {
		p.unbound = unboundNamespaces(si.Name, p.targets.Namespaces, append(slices.Clip(p.pending), p.ahead...), p.existing)
	}
	keep := binding.Keep(si.Name, p.want.Objects(), p.targets, p.pending)
	p.revoke = p.existing.Stale(keep, p.targets)
	if sa := si.Spec.ServiceAccount; sa != nil {
		p.ceiling = newCeiling(*sa, t, g.inline, g.ceilings)
		p.ceiling.annotate(p)
	}
}

// decideGate makes the plan of a gated instance bind its gate: every role
// of the template is a source (an inline role the ScopeTemplate controller
// has not written yet, or not yet with the template's rules, included: the
// gate copies the template's rules), except those in conflict; the
// RoleBindings bind the gate, which holds the sources' rules when open. A
// gate name held by someone else binds nothing.
func decideGate(g gathered, p *plan) {
	p.roles = append(p.roles, p.pending...)
	slices.Sort(p.roles)
	p.pending, p.ahead = nil, nil
	p.gate = gatePlan{cur: g.gate, conflict: g.squat}
	if g.squat != "" {
		p.want = binding.Set{}
		return
	}
	sources, _ := binding.GateSources(g.template, p.roles, func(name string) ([]rbacv1.PolicyRule, error) {
		rules, ok := g.live[name]
		if !ok {
			p.gate.missing = append(p.gate.missing, name)
		}
		return rules, nil
	})
	p.gate.want = binding.GateRole(g.si, sources, p.phase == binding.WindowOpen)
	switch {
	case g.gate == nil:
		p.gate.op = gateCreate
	case !ownership.GateGrants(p.gate.want):
		p.gate.op = gateNarrow
	default:
		p.gate.op = gateFill
	}
	p.want = binding.Bindings(g.si, g.template.Name, []string{p.gate.want.Name}, g.template.Spec.BindingTemplate.Subjects, p.targets)
}

// decideRevokeOnly decides what an instance with a spec error revokes: it
// writes nothing new, but keeps at most what its last valid state granted
// (the bindings that exist) and its current spec still allows
// (binding.Narrow), and, with a ceiling, what its ServiceAccount still
// allows. A template that does not exist allows nothing: its bindings go
// (fail closed). Keeping them would keep bindings to roles nobody judges
// any more, among them its inline roles, which oria deletes with the
// template, so that whoever creates a ClusterRole under such a name would
// choose what they grant (the sequence fuzzer's seed 1795879018575510949).
func decideRevokeOnly(g gathered, p *plan, recreated []string) {
	a := binding.Allowance{KnownTemplate: true}
	if targets, serr := binding.ResolveTargets(g.si.Spec, g.namespaces); serr == nil {
		targets = targets.Without(recreated)
		a.Targets = &targets
	}
	if g.template != nil {
		a.Roles = binding.RoleNames(binding.Roles(g.template))
		a.Subjects = g.template.Spec.BindingTemplate.Subjects
	}
	if g.gate != nil {
		// Narrowed to what the spec allows, and empty before the window; it
		// never gains a rule it does not hold (binding.NarrowGate): what it
		// stands for is read from its annotation, which anyone who may
		// patch ClusterRoles can write.
		var sources []binding.GateSource
		for _, name := range binding.GateRoles(g.gate) {
			if slices.Contains(a.Roles, name) {
				sources = append(sources, binding.GateSource{Name: name, Rules: g.live[name]})
			}
		}
		// The gate's bindings are allowed as far as the gate is narrowed.
		a.Roles = append(a.Roles, g.gate.Name)
		p.gate = gatePlan{op: gateNarrow, cur: g.gate, want: binding.NarrowGate(binding.GateRole(g.si, sources, p.phase == binding.WindowOpen), g.gate)}
	}
	if g.existing.Len() == 0 {
		return
	}
	p.revoke = g.existing.Narrow(a)
	if p.hasCeiling {
		p.revoke = p.revoke.Union(beyondCeiling(g))
	}
}

// beyondCeiling returns the bindings of an instance with a ceiling and a
// spec error whose recorded ceiling is not what their role grants, or is
// about to grant: the template's rules for its inline roles (the
// ScopeTemplate controller would otherwise hold them back for as long as
// the spec error lasts), the rules as they are for any other role. A role
// that does not exist grants nothing: its bindings stay (the ceiling
// decides when it is created).
func beyondCeiling(g gathered) binding.Set {
	values := map[string]string{}
	if g.template != nil && binding.ValidateTemplate(g.template) == nil {
		for _, role := range binding.Roles(g.template) {
			if role.Inline {
				values[role.Name] = binding.CeilingHash(role.Rules)
			}
		}
	}
	beyond := func(b client.Object, role string) bool {
		v, ok := values[role]
		if !ok {
			v = g.ceilings[role]
		}
		return v != "" && v != binding.CeilingAbsent && binding.Ceiling(b) != v
	}
	return g.existing.Filter(func(b client.Object) bool { return beyond(b, binding.RoleOf(b)) })
}

// binds reports whether a reconcile of spec at phase binds: inside the
// window, or, for a gated instance, before it (its bindings are made
// then, to its empty gate: gate.go).
func binds(spec oriav1alpha1.ScopeInstanceSpec, phase binding.Phase) bool {
	return phase == binding.WindowOpen || (phase == binding.WindowPending && binding.Gated(spec))
}

// instantPriority is the priority of the requeue at the next instant of an
// instance's window, over routine work (0): 3 for a gated grant, whose
// instant is one write (gate.go), 2 for a small grant, 1 for another
// fan-out. Of the grants starting or expiring together, the small ones,
// each one quick reconcile, go first: a fan-out's writes started first
// slow every one of them down, and take no less time themselves, the API
// server's work at the instant being the same (docs/benchmarks.md,
// expiry).
func instantPriority(spec oriav1alpha1.ScopeInstanceSpec) int {
	if binding.Gated(spec) {
		return 3
	}
	if binding.FanOut(spec) {
		return 1
	}
	return 2
}
