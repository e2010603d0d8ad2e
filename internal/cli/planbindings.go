package cli

import (
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/bundlerole"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/ownership"
)

// roleChanges records the changes of a template's inline ClusterRoles.
func (p *planner) roleChanges(t *oriav1alpha1.ScopeTemplate) {
	if serr := binding.ValidateTemplate(t); serr != nil {
		p.note("ScopeTemplate %s: %s: %s; nothing changes until it is fixed", t.Name, serr.Reason, serr.Message)
		return
	}
	owner := "ScopeTemplate " + t.Name
	wanted := map[string]bool{}
	for _, cr := range binding.ClusterRoles(t) {
		wanted[cr.Name] = true
		have := p.roles[cr.Name]
		c := Change{Kind: "ClusterRole", Name: cr.Name, Owner: owner, Detail: formatRules(cr.Rules)}
		switch {
		case have == nil:
			c.Action = ActionCreate
		case !ownership.TemplateOwns(have, t.Name):
			p.note("ScopeTemplate %s: ClusterRole %s exists and is not oria's for this template: it is not created, and not bound", t.Name, cr.Name)
			continue
		case !equality.Semantic.DeepEqual(have.Rules, cr.Rules):
			c.Action = ActionUpdate
		default:
			p.report.Unchanged++
			continue
		}
		p.change(c)
	}
	for i := range p.st.ClusterRoles {
		cr := &p.st.ClusterRoles[i]
		if !wanted[cr.Name] && ownership.TemplateOwns(cr, t.Name) {
			p.change(Change{Action: ActionDelete, Kind: "ClusterRole", Name: cr.Name, Owner: owner, Detail: formatRules(cr.Rules)})
		}
	}
}

func formatRules(rules []rbacv1.PolicyRule) string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = bundlerole.FormatRule(r)
	}
	return strings.Join(out, " ")
}

// instanceChanges records the changes of the bindings of the instance
// named name, and of its gate (plangate.go); si nil means the instance
// goes, and its bindings and gate with it.
func (p *planner) instanceChanges(name string, si *oriav1alpha1.ScopeInstance) {
	mine := func(o client.Object) bool {
		return o.GetLabels()[oriav1alpha1.LabelScopeInstance] == names.LabelValue(name) &&
			ownership.NotControlledByOther(o, ownership.KindScopeInstance, name)
	}
	var haveRBs []*rbacv1.RoleBinding
	for i := range p.st.RoleBindings {
		if mine(&p.st.RoleBindings[i]) {
			haveRBs = append(haveRBs, &p.st.RoleBindings[i])
		}
	}
	var haveCRBs []*rbacv1.ClusterRoleBinding
	for i := range p.st.ClusterRoleBindings {
		if mine(&p.st.ClusterRoleBindings[i]) {
			haveCRBs = append(haveCRBs, &p.st.ClusterRoleBindings[i])
		}
	}
	owner := "ScopeInstance " + name
	existing := append(binding.Objects(haveRBs), binding.Objects(haveCRBs)...)
	gates := p.gatesOf(name)
	var gated *gatedPlan
	binds, open := si != nil, true
	if binds && binding.Gated(si.Spec) {
		g := p.planGate(si)
		gated = &g
		binds, open = p.gateWindow(si, &g)
	} else if binds {
		binds = p.inWindow(si)
	}
	if !binds {
		p.diff(owner, nil, existing, existing)
		p.deleteGates(owner, gates, "")
		return
	}
	t, targets, roles, ok := p.resolve(si)
	if !ok {
		if gated != nil && gated.pendingNote >= 0 {
			p.report.Notes[gated.pendingNote] += " (not computed: see below)"
		}
		return
	}
	p.summarize(t, si.Name)
	if gated != nil {
		gated.fill(p, si, t, targets, roles, open)
		p.gatedChanges(si, *gated, existing)
		return
	}
	subj := t.Spec.BindingTemplate.Subjects
	var want []client.Object
	if targets.Cluster {
		want = binding.Objects(binding.ClusterRoleBindings(si, t.Name, roles, subj))
	} else {
		want = binding.Objects(binding.RoleBindings(si, t.Name, roles, subj, targets.Namespaces))
	}
	keep := binding.Keep(si.Name, want, targets, nil)
	stale := append(binding.Objects(binding.Stale(haveRBs, keep, targets)), binding.Objects(binding.Stale(haveCRBs, keep, targets))...)
	p.ceiling = si.Spec.ServiceAccount
	p.diff(owner, want, existing, stale)
	p.ceiling = nil
	p.deleteGates(owner, gates, "") // a gate left from when the instance was gated
}

// resolve finds what an instance binds, where, as the ScopeInstance
// controller does; ok is false (with a note) when a spec error leaves its
// bindings as they are.
func (p *planner) resolve(si *oriav1alpha1.ScopeInstance) (t *oriav1alpha1.ScopeTemplate, targets binding.Targets, roles []string, ok bool) {
	t = p.templates[si.Spec.ScopeTemplateName]
	if t == nil && p.unread(ListTemplates) {
		p.note("ScopeInstance %s: %s may not list scopetemplates: ScopeTemplate %q is unknown, and its bindings are not computed",
			si.Name, p.requester(), si.Spec.ScopeTemplateName)
		return nil, targets, nil, false
	}
	if t == nil {
		p.note("ScopeInstance %s: ScopeTemplate %q does not exist: its bindings stay as they are until it does", si.Name, si.Spec.ScopeTemplateName)
		return nil, targets, nil, false
	}
	if serr := binding.ValidateTemplate(t); serr != nil {
		p.note("ScopeInstance %s: ScopeTemplate %q is not valid (%s): its bindings stay as they are", si.Name, t.Name, serr.Message)
		return nil, targets, nil, false
	}
	var serr *binding.SpecError
	if !p.unknownTargets(si) {
		return nil, targets, nil, false
	}
	if binding.IsClusterWide(si.Spec) {
		targets.Cluster, serr = true, binding.ValidateClusterSubjects(t.Spec.BindingTemplate.Subjects)
	} else {
		targets, serr = binding.ResolveTargets(si.Spec, p.st.Namespaces)
	}
	if serr != nil {
		p.note("ScopeInstance %s: %s: its bindings stay as they are", si.Name, serr.Message)
		return nil, targets, nil, false
	}
	if len(targets.Missing) > 0 {
		p.note("ScopeInstance %s: namespaces %s do not exist: bound once they do", si.Name, strings.Join(targets.Missing, ", "))
	}
	for _, r := range binding.Roles(t) {
		have := p.roles[r.Name]
		switch {
		case r.Inline && have != nil && !ownership.TemplateOwns(have, t.Name):
			continue // noted with the template's roles
		case !r.Inline && have == nil && !p.unread(ListClusterRoles):
			p.note("ScopeInstance %s: ClusterRole %s does not exist: its bindings grant nothing until it does", si.Name, r.Name)
		}
		roles = append(roles, r.Name)
	}
	return t, targets, roles, true
}

// diff records the creation, update and deletion of bindings: want are the
// intended ones, have the existing ones, stale those to delete.
func (p *planner) diff(owner string, want, existing, stale []client.Object) {
	have := map[string]client.Object{}
	for _, o := range existing {
		have[o.GetNamespace()+"/"+o.GetName()] = o
	}
	for _, w := range want {
		ref, subj := bindingOf(w)
		c := Change{Kind: kindOf(w), Namespace: w.GetNamespace(), Name: w.GetName(), Role: ref.Name, Subjects: subjectStrings(subj), Owner: owner}
		h, ok := have[w.GetNamespace()+"/"+w.GetName()]
		if !ok {
			c.Action = ActionCreate
			p.change(c)
			p.askCeiling(c, w, nil)
			continue
		}
		hRef, hSubj := bindingOf(h)
		if ref == hRef && equality.Semantic.DeepEqual(subj, hSubj) {
			p.report.Unchanged++
			continue
		}
		c.Action, c.Detail = ActionUpdate, subjectsDiff(hSubj, subj)
		if ref != hRef {
			c.Detail = "roleRef " + hRef.Name + " -> " + ref.Name
		}
		p.change(c)
		p.askCeiling(c, w, h)
	}
	for _, o := range stale {
		ref, subj := bindingOf(o)
		p.change(Change{Action: ActionDelete, Kind: kindOf(o), Namespace: o.GetNamespace(), Name: o.GetName(), Role: ref.Name,
			Subjects: subjectStrings(subj), Owner: owner})
	}
}

func bindingOf(o client.Object) (rbacv1.RoleRef, []rbacv1.Subject) {
	switch b := o.(type) {
	case *rbacv1.RoleBinding:
		return b.RoleRef, b.Subjects
	case *rbacv1.ClusterRoleBinding:
		return b.RoleRef, b.Subjects
	}
	return rbacv1.RoleRef{}, nil
}

func kindOf(o client.Object) string {
	if _, ok := o.(*rbacv1.RoleBinding); ok {
		return "RoleBinding"
	}
	return "ClusterRoleBinding"
}

func subjectStrings(subj []rbacv1.Subject) []string {
	if len(subj) == 0 {
		return nil
	}
	out := make([]string, len(subj))
	for i, s := range subj {
		out[i] = SubjectString(s)
	}
	return out
}

// subjectsDiff writes what changes between two subject lists: "subjects:
// +Group a, -User b".
func subjectsDiff(old, new []rbacv1.Subject) string {
	o, n := subjectStrings(old), subjectStrings(new)
	var parts []string
	for _, s := range n {
		if !slices.Contains(o, s) {
			parts = append(parts, "+"+s)
		}
	}
	for _, s := range o {
		if !slices.Contains(n, s) {
			parts = append(parts, "-"+s)
		}
	}
	if len(parts) == 0 {
		return "subjects reordered"
	}
	return "subjects: " + strings.Join(parts, ", ")
}

// summarize records what template t binds for the instance.
func (p *planner) summarize(t *oriav1alpha1.ScopeTemplate, instance string) {
	for i := range p.report.Templates {
		if pt := &p.report.Templates[i]; pt.Name == t.Name {
			pt.Instances = append(pt.Instances, instance)
			return
		}
	}
	pt := PlanTemplate{Name: t.Name, Subjects: templateSubjects(t.Spec.BindingTemplate.Subjects), Instances: []string{instance}}
	for _, r := range binding.Roles(t) {
		role := PlanRole{Name: r.Name}
		have := p.roles[r.Name]
		switch {
		case r.Inline && have != nil && !ownership.TemplateOwns(have, t.Name):
			role.Source = RoleConflicts
		case r.Inline:
			role.Source = RoleInline
			for _, rule := range r.Rules {
				role.Rules = append(role.Rules, bundlerole.FormatRule(rule))
			}
		case have == nil && p.unread(ListClusterRoles):
			role.Source = RoleUnknown
		case have == nil:
			role.Source = RoleNotFound
		default:
			role.Source = RoleExisting
			for _, rule := range have.Rules {
				role.Rules = append(role.Rules, bundlerole.FormatRule(rule))
			}
		}
		pt.Roles = append(pt.Roles, role)
	}
	p.report.Templates = append(p.report.Templates, pt)
}

// templateSubjects writes a template's subjects: a ServiceAccount without a
// namespace is bound in each target namespace ("ServiceAccount
// <namespace>/deployer"), never "ServiceAccount /deployer".
func templateSubjects(subj []rbacv1.Subject) []string {
	out := subjectStrings(subj)
	for i, s := range subj {
		if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == "" {
			out[i] = s.Kind + " <namespace>/" + s.Name
		}
	}
	return out
}
