package cli

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/bundlerole"
	"github.com/operator-framework/oria/internal/ownership"
	policymodel "github.com/operator-framework/oria/internal/policy"
)

// Actions of a planned change.
const (
	ActionCreate = "create"
	ActionUpdate = "update"
	ActionDelete = "delete"
)

// PlanReport is the body of `kubectl oria plan -o json|yaml`: what
// applying a file would grant, and whether the guard admits it.
type PlanReport struct {
	// Skipped are the objects of the files plan does not take (other
	// kinds), and why.
	Skipped []SkippedObject `json:"skipped,omitempty"`
	Objects []PlannedObject `json:"objects"`
	// Templates are the ScopeTemplates the changed instances bind: what
	// each binds, to whom.
	Templates []PlanTemplate `json:"templates,omitempty"`
	// Changes are the ClusterRoles, bindings and compiled objects created,
	// updated or deleted, sorted by namespace, kind and name.
	Changes []Change `json:"changes"`
	// Unchanged counts the objects that stay as they are.
	Unchanged int `json:"unchanged"`
	// Notes say what the changes leave out (spec errors, conflicts,
	// missing namespaces or roles, what the requester may not read).
	Notes []string `json:"notes,omitempty"`
	// Unread are the lists (namespaces, clusterroles, rolebindings, ...)
	// the requester, As, may not read: what plan computes from them is
	// unknown, and the notes say what that leaves out.
	Unread []string `json:"unread,omitempty"`
	As     string   `json:"as,omitempty"`
}

// PlannedObject is one object of the file and the guard's verdict on it.
type PlannedObject struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Operation is create (new) or update (changed).
	Operation string `json:"operation"`
	// Admitted is the API server's answer to a server-side dry run of the
	// operation (the escalation guard runs on dry runs); Message is its
	// refusal.
	Admitted bool   `json:"admitted"`
	Message  string `json:"message,omitempty"`
}

// PlanTemplate is a ScopeTemplate as an instance binds it.
type PlanTemplate struct {
	Name     string     `json:"name"`
	Subjects []string   `json:"subjects"`
	Roles    []PlanRole `json:"roles"`
	// Instances are the changed instances that bind it.
	Instances []string `json:"instances"`
}

// Sources of a planned role.
const (
	RoleInline    = "inline"
	RoleExisting  = "ClusterRole"
	RoleNotFound  = "missing"
	RoleConflicts = "conflict"
	// RoleUnknown is a ClusterRole the requester may not read.
	RoleUnknown = "unknown"
)

// PlanRole is one role of a template: inline (oria creates it), an
// existing ClusterRole, missing, or an inline role whose name another
// ClusterRole holds (conflict: not bound).
type PlanRole struct {
	Name   string   `json:"name"`
	Source string   `json:"source"`
	Rules  []string `json:"rules,omitempty"`
}

// Change is one object a plan creates, updates or deletes.
type Change struct {
	Action    string `json:"action"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Role is a binding's ClusterRole.
	Role string `json:"role,omitempty"`
	// Subjects are a binding's subjects after the change (before it, for a
	// deletion).
	Subjects []string `json:"subjects,omitempty"`
	// Detail says what an update changes.
	Detail string `json:"detail,omitempty"`
	// Owner is the ScopeInstance, ScopeTemplate or RBACPolicy the object
	// is written for.
	Owner string `json:"owner,omitempty"`
	// Refused is true for a change that only objects the API server
	// refuses (their dry run) would make: it does not happen, and is not
	// counted.
	Refused bool `json:"refused,omitempty"`
}

// PlanState is what a plan reads from the cluster.
type PlanState struct {
	Namespaces          []binding.Namespace
	Extensions          []ocv1.ClusterExtension
	CRDs                []API
	CRDOwner            map[string]string // CRD name -> extension
	Templates           []oriav1alpha1.ScopeTemplate
	Instances           []oriav1alpha1.ScopeInstance
	ClusterRoles        []rbacv1.ClusterRole
	RoleBindings        []rbacv1.RoleBinding // oria's, labelled with their instance
	ClusterRoleBindings []rbacv1.ClusterRoleBinding
	// Now is the instant the windows of time-bound grants are judged at.
	Now time.Time
	// Unread are the lists the requester (Requester) may not read (List*
	// constants): they are empty here, and unknown. Assumed are namespaces
	// that instances name, which the requester may neither list nor get:
	// they are in Namespaces, taken to exist.
	Unread    []string
	Assumed   []string
	Requester string
}

// planner builds a PlanReport.
type planner struct {
	st        *PlanState
	templates map[string]*oriav1alpha1.ScopeTemplate // the cluster's, overlaid
	instances map[string]*oriav1alpha1.ScopeInstance
	roles     map[string]*rbacv1.ClusterRole
	report    PlanReport
	// ceiling is the ServiceAccount the bindings being diffed are written
	// as (planceiling.go), checks what it is asked.
	ceiling *oriav1alpha1.ServiceAccountReference
	checks  []ceilingCheck
}

// Plan computes what applying objs (RBACPolicies, ScopeTemplates and
// ScopeInstances as they would be stored) changes on a cluster in state st,
// with the functions the controllers use: policy.Compile for a policy,
// package binding for templates and instances. verdicts are the guard's,
// one per object. Objects of the file replace the cluster's of the same
// name; a policy is replaced by what it compiles into.
func Plan(st *PlanState, objs []client.Object, verdicts []PlannedObject) PlanReport {
	report, _ := plan(st, objs, verdicts)
	return report
}

// plan is Plan, with the bindings a ServiceAccount ceiling writes.
func plan(st *PlanState, objs []client.Object, verdicts []PlannedObject) (PlanReport, []ceilingCheck) {
	p := &planner{st: st, templates: map[string]*oriav1alpha1.ScopeTemplate{}, instances: map[string]*oriav1alpha1.ScopeInstance{},
		roles: map[string]*rbacv1.ClusterRole{}, report: PlanReport{Objects: verdicts, Changes: []Change{}}}
	for i := range st.Templates {
		p.templates[st.Templates[i].Name] = &st.Templates[i]
	}
	for i := range st.Instances {
		p.instances[st.Instances[i].Name] = &st.Instances[i]
	}
	for i := range st.ClusterRoles {
		p.roles[st.ClusterRoles[i].Name] = &st.ClusterRoles[i]
	}
	p.unreadNotes(objs)
	changedTemplates, changedInstances := map[string]bool{}, map[string]bool{}
	for _, o := range objs {
		switch o := o.(type) {
		case *oriav1alpha1.ScopeTemplate:
			p.templates[o.Name], changedTemplates[o.Name] = o, true
		case *oriav1alpha1.ScopeInstance:
			p.instances[o.Name], changedInstances[o.Name] = o, true
		case *oriav1alpha1.RBACPolicy:
			t, si, keep := p.compile(o)
			if keep {
				continue
			}
			name := policymodel.ObjectName(o.Name)
			p.compiled(ownership.KindScopeTemplate, name, o.Name, asObject(t), asObject(p.templates[name]))
			p.compiled(ownership.KindScopeInstance, name, o.Name, asObject(si), asObject(p.instances[name]))
			changedTemplates[name], changedInstances[name] = true, true
			if t == nil {
				delete(p.templates, name)
				delete(p.instances, name)
				p.instanceChanges(name, nil)
				changedInstances[name] = false
				continue
			}
			p.templates[name], p.instances[name] = t, si
		}
	}
	for _, t := range slices.Sorted(mapKeys(changedTemplates)) {
		if tmpl, ok := p.templates[t]; ok {
			p.roleChanges(tmpl)
		}
	}
	for _, si := range p.instances {
		if changedTemplates[si.Spec.ScopeTemplateName] {
			changedInstances[si.Name] = true
		}
	}
	for _, name := range slices.Sorted(mapKeys(changedInstances)) {
		if si, ok := p.instances[name]; ok && changedInstances[name] {
			p.instanceChanges(name, si)
		}
	}
	slices.SortStableFunc(p.report.Changes, func(a, b Change) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(kindOrder(a.Kind), kindOrder(b.Kind)), cmp.Compare(a.Name, b.Name))
	})
	return p.report, p.checks
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// kindOrder lists compiled objects and roles before bindings.
func kindOrder(kind string) int {
	return slices.Index([]string{"ScopeTemplate", "ScopeInstance", "ClusterRole", "ClusterRoleBinding", "RoleBinding"}, kind)
}

func (p *planner) note(format string, args ...any) {
	p.report.Notes = append(p.report.Notes, fmt.Sprintf(format, args...))
}

// compile returns what a policy compiles into, as the RBACPolicy controller
// decides it; nil when it grants nothing (the compiled objects go); keep
// when a spec error leaves the compiled objects as they are.
func (p *planner) compile(pol *oriav1alpha1.RBACPolicy) (_ *oriav1alpha1.ScopeTemplate, _ *oriav1alpha1.ScopeInstance, keep bool) {
	if problems := policymodel.ValidateSubjects(pol.Spec.Subjects); len(problems) > 0 {
		p.note("RBACPolicy %s: %s: nothing changes until it is fixed", pol.Name, strings.Join(problems, "; "))
		return nil, nil, true
	}
	if pol.Spec.NamespaceSelector != nil {
		if _, err := metav1.LabelSelectorAsSelector(pol.Spec.NamespaceSelector); err != nil {
			p.note("RBACPolicy %s: spec.namespaceSelector: %v: nothing changes until it is fixed", pol.Name, err)
			return nil, nil, true
		}
	}
	var ext *ocv1.ClusterExtension
	for i := range p.st.Extensions {
		if p.st.Extensions[i].Name == pol.Spec.ExtensionName {
			ext = &p.st.Extensions[i]
		}
	}
	if why := p.unreadOf(ListExtensions, ListCRDs); why != "" {
		p.note("RBACPolicy %s: %s: what it compiles into is not computed", pol.Name, why)
		return nil, nil, true
	}
	if ext == nil {
		p.note("RBACPolicy %s: ClusterExtension %q does not exist: nothing is granted until it is installed", pol.Name, pol.Spec.ExtensionName)
		return nil, nil, false
	}
	switch mode, valid := extensionMode(ext); {
	case !valid:
		p.note("RBACPolicy %s: ClusterExtension %q has an invalid %s annotation: nothing changes until it is fixed", pol.Name, ext.Name, oriav1alpha1.AnnotationRBACMode)
		return nil, nil, true
	case mode != oriav1alpha1.RBACModeFineGrained && mode != oriav1alpha1.RBACModeLegacy:
		p.note("RBACPolicy %s: ClusterExtension %q is in %s mode: oria grants nothing for it", pol.Name, ext.Name, mode)
		return nil, nil, false
	}
	var crds []string
	for _, api := range p.st.CRDs {
		if p.st.CRDOwner[api.CRD] == ext.Name {
			crds = append(crds, api.CRD)
		}
	}
	c := policymodel.Compile(pol, crds)
	if len(c.Missing) > 0 {
		p.note("RBACPolicy %s: ClusterExtension %q does not provide %s", pol.Name, ext.Name, strings.Join(c.Missing, ", "))
	}
	for _, why := range c.Withhold(bundlerole.TooBroad(ext.Name, crds, p.st.ClusterRoles)) {
		p.note("RBACPolicy %s: withheld: %s", pol.Name, why)
	}
	return c.Template, c.Instance, false
}

// extensionMode is the mode an extension is in: its annotation, else the
// mode its RBACManaged condition reports (oria's default), else Unmanaged
// (the default of oria's --default-rbac-mode). valid is false for an
// annotation of no known mode.
func extensionMode(ext *ocv1.ClusterExtension) (oriav1alpha1.RBACMode, bool) {
	if v, ok := ext.Annotations[oriav1alpha1.AnnotationRBACMode]; ok {
		return oriav1alpha1.ParseRBACMode(v)
	}
	if c := meta.FindStatusCondition(ext.Status.Conditions, oriav1alpha1.TypeRBACManaged); c != nil {
		if m, ok := oriav1alpha1.ParseRBACMode(c.Reason); ok {
			return m, true
		}
	}
	return oriav1alpha1.RBACModeUnmanaged, true
}

// compiled records the change of a compiled ScopeTemplate or ScopeInstance
// (want nil: deleted).
func (p *planner) compiled(kind, name, policy string, want, have client.Object) {
	owner := "RBACPolicy " + policy
	switch {
	case want == nil && have != nil:
		p.change(Change{Action: ActionDelete, Kind: kind, Name: name, Owner: owner})
	case want == nil:
	case have == nil:
		p.change(Change{Action: ActionCreate, Kind: kind, Name: name, Owner: owner})
	case !equality.Semantic.DeepEqual(specOf(want), specOf(have)):
		p.change(Change{Action: ActionUpdate, Kind: kind, Name: name, Owner: owner, Detail: "spec"})
	default:
		p.report.Unchanged++
	}
}

// asObject is o as a client.Object, nil when o is a nil pointer.
func asObject[T any, P interface {
	*T
	client.Object
}](o P) client.Object {
	if o == nil {
		return nil
	}
	return o
}

func specOf(o client.Object) any {
	switch o := o.(type) {
	case *oriav1alpha1.ScopeTemplate:
		return o.Spec
	case *oriav1alpha1.ScopeInstance:
		return o.Spec
	}
	return nil
}

func (p *planner) change(c Change) { p.report.Changes = append(p.report.Changes, c) }
