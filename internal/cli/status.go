package cli

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/olm"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/record"
)

// Scopes of an API, as the status report writes them.
const (
	ScopeNamespaced = "Namespaced"
	ScopeCluster    = "Cluster"
)

// Sources of a role, as the status report writes them.
const (
	// SourceGenerated: oria generated the role for the extension.
	SourceGenerated = "generated"
	// SourceBundle: the extension's bundle provides a role of that name,
	// which oria uses instead of generating one.
	SourceBundle = "bundle"
	// SourceConflict: a role of that name exists and is neither oria's nor
	// the bundle's (the extension reports Conflict).
	SourceConflict = "conflict"
	// SourceMissing: the mode manages RBAC but the role does not exist (yet).
	SourceMissing = "missing"
)

// API is one API an extension provides (one of its CRDs).
type API struct {
	CRD      string `json:"crd"`
	Group    string `json:"group"`
	Resource string `json:"resource"`
	Kind     string `json:"kind"`
	// Scope is Namespaced or Cluster.
	Scope string `json:"scope"`
}

// Role is one ClusterRole of an API, under the name oria generates.
type Role struct {
	Name   string `json:"name"`
	API    string `json:"api"`
	Source string `json:"source"`
	// AggregatesTo lists the built-in roles the role aggregates into
	// (admin, edit, view): Legacy mode.
	AggregatesTo []string `json:"aggregatesTo,omitempty"`
}

// Grant is an RBACPolicy for the extension, or the ScopeInstance it is
// compiled into.
type Grant struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Access string `json:"access,omitempty"`
	// Where is "cluster-wide" or the bound namespaces.
	Where   string `json:"where"`
	Ready   string `json:"ready"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
	// Subjects are who the grant binds (the policy's, or the template's).
	Subjects []string `json:"subjects,omitempty"`
	// Window is the window of a time-bound grant, judged when the report
	// was made; absent for a grant without one.
	Window *GrantWindow `json:"window,omitempty"`
	// Granted and Revoked are the records of who granted and who revoked
	// it, when and why (package record; the guard keeps them true), on
	// the RBACPolicy or a ScopeInstance of its own; absent when none is
	// kept.
	Granted *record.Record `json:"granted,omitempty"`
	Revoked *record.Record `json:"revoked,omitempty"`
	// Request is the AccessRequest an activation's grant was compiled
	// for (eligible access): who asked, why, who approved.
	Request *RequestRecord `json:"request,omitempty"`
}

// records returns the records of annotations, nil when empty.
func records(annotations map[string]string) (granted, revoked *record.Record) {
	if r := record.Grant.Of(annotations); !r.Empty() {
		granted = &r
	}
	if r := record.Revocation.Of(annotations); !r.Empty() {
		revoked = &r
	}
	return granted, revoked
}

// ExtensionStatus is the status report of one ClusterExtension.
type ExtensionStatus struct {
	Name string `json:"name"`
	// NotFound: the ClusterExtension does not exist, and RBACPolicies name
	// it (they grant nothing until it is installed).
	NotFound bool `json:"notFound,omitempty"`
	// Mode is the rbac-mode annotation, or the mode oria reports applying
	// by default (ModeFromDefault).
	Mode            string  `json:"mode"`
	ModeFromDefault bool    `json:"modeFromDefault,omitempty"`
	RBACManaged     string  `json:"rbacManaged"`
	Reason          string  `json:"reason"`
	Message         string  `json:"message,omitempty"`
	APIs            []API   `json:"apis"`
	Roles           []Role  `json:"roles"`
	Grants          []Grant `json:"grants"`
}

// Status builds the status report of the named extensions (all when none
// is named, with those that RBACPolicies name but that do not exist),
// sorted by name. A named extension that does not exist and that no
// RBACPolicy names is an error.
func Status(s *Snapshot, extensions ...string) ([]ExtensionStatus, error) {
	byName := map[string]*ocv1.ClusterExtension{}
	for i := range s.Extensions {
		byName[s.Extensions[i].Name] = &s.Extensions[i]
	}
	named := map[string]bool{} // by an RBACPolicy
	for _, p := range s.Policies {
		named[p.Spec.ExtensionName] = true
	}
	if len(extensions) == 0 {
		for name := range byName {
			extensions = append(extensions, name)
		}
		for name := range named {
			if byName[name] == nil {
				extensions = append(extensions, name)
			}
		}
	}
	slices.Sort(extensions)
	out := make([]ExtensionStatus, 0, len(extensions))
	for _, name := range extensions {
		ce, ok := byName[name]
		switch {
		case ok:
			out = append(out, extensionStatus(s, ce))
		case named[name]:
			out = append(out, missingExtension(s, name))
		default:
			return nil, fmt.Errorf("clusterextension %q not found", name)
		}
	}
	return out, nil
}

// missingExtension is the status of an extension that RBACPolicies name
// but that does not exist.
func missingExtension(s *Snapshot, name string) ExtensionStatus {
	return ExtensionStatus{Name: name, NotFound: true, Mode: "none", RBACManaged: string(metav1.ConditionUnknown), Reason: "NotFound",
		Message: fmt.Sprintf("ClusterExtension %q does not exist: the RBACPolicies naming it grant nothing until it is installed", name),
		Grants:  extensionGrants(s, name)}
}

func extensionStatus(s *Snapshot, ce *ocv1.ClusterExtension) ExtensionStatus {
	st := ExtensionStatus{Name: ce.Name, RBACManaged: string(metav1.ConditionUnknown), Reason: "NotReported"}
	cond := meta.FindStatusCondition(ce.Status.Conditions, oriav1alpha1.TypeRBACManaged)
	if cond != nil {
		st.RBACManaged, st.Reason, st.Message = string(cond.Status), cond.Reason, cond.Message
	}
	if v, ok := ce.Annotations[oriav1alpha1.AnnotationRBACMode]; ok {
		st.Mode = v
		if _, valid := oriav1alpha1.ParseRBACMode(v); !valid {
			// What is in force is what was before the typo; oria changes
			// nothing until it is fixed (RBACManaged=False, InvalidMode).
			st.Mode = fmt.Sprintf("invalid %q", v)
		}
	} else if cond != nil {
		if m, ok := oriav1alpha1.ParseRBACMode(cond.Reason); ok {
			st.Mode, st.ModeFromDefault = string(m), true
		}
	}
	if st.Mode == "" {
		st.Mode, st.ModeFromDefault = "unknown", true
	}
	st.APIs = ExtensionAPIs(s.CRDs, ce.Name)
	st.Roles = extensionRoles(s.ClusterRoles, ce.Name, st.APIs, st.Mode)
	st.Grants = append(extensionGrants(s, ce.Name), instanceGrants(s, st.APIs)...)
	return st
}

// ExtensionAPIs returns the APIs of the named extension: its CRDs (as
// operator-controller labels them), sorted by CRD name.
func ExtensionAPIs(crds []apiextensionsv1.CustomResourceDefinition, extension string) []API {
	var out []API
	for _, crd := range crds {
		if olm.ExtensionOf(&crd) != extension || crd.DeletionTimestamp != nil {
			continue
		}
		scope := ScopeNamespaced
		if crd.Spec.Scope == apiextensionsv1.ClusterScoped {
			scope = ScopeCluster
		}
		out = append(out, API{CRD: crd.Name, Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural, Kind: crd.Spec.Names.Kind, Scope: scope})
	}
	slices.SortFunc(out, func(a, b API) int { return cmp.Compare(a.CRD, b.CRD) })
	return out
}

func extensionRoles(roles []rbacv1.ClusterRole, extension string, apis []API, mode string) []Role {
	byName := map[string]*rbacv1.ClusterRole{}
	for i := range roles {
		byName[roles[i].Name] = &roles[i]
	}
	managed := mode == string(oriav1alpha1.RBACModeLegacy) || mode == string(oriav1alpha1.RBACModeFineGrained)
	var out []Role
	for _, api := range apis {
		for _, k := range names.RoleKinds {
			name := names.ExtensionRole(api.CRD, k)
			cr, ok := byName[name]
			if !ok {
				if managed {
					out = append(out, Role{Name: name, API: api.CRD, Source: SourceMissing})
				}
				continue
			}
			out = append(out, Role{Name: name, API: api.CRD, Source: roleSource(cr, extension), AggregatesTo: aggregatesTo(cr.Labels)})
		}
	}
	return out
}

func roleSource(cr *rbacv1.ClusterRole, extension string) string {
	l := cr.Labels
	switch {
	case ownership.HasLabels(l, map[string]string{
		oriav1alpha1.LabelManaged:   oriav1alpha1.ManagedValue,
		oriav1alpha1.LabelExtension: names.LabelValue(extension),
	}):
		return SourceGenerated
	case olm.ExtensionOf(cr) == extension:
		return SourceBundle
	default:
		return SourceConflict
	}
}

func aggregatesTo(l map[string]string) []string {
	var out []string
	for _, a := range []struct{ label, role string }{
		{oriav1alpha1.LabelAggregateToAdmin, "admin"},
		{oriav1alpha1.LabelAggregateToEdit, "edit"},
		{oriav1alpha1.LabelAggregateToView, "view"},
	} {
		if l[a.label] == "true" {
			out = append(out, a.role)
		}
	}
	return out
}

// extensionGrants lists the RBACPolicies of the extension, each followed by
// the ScopeInstance it is compiled into.
func extensionGrants(s *Snapshot, extension string) []Grant {
	instances := map[string]*oriav1alpha1.ScopeInstance{}
	for i := range s.Instances {
		instances[s.Instances[i].Name] = &s.Instances[i]
	}
	policies := slices.Clone(s.Policies)
	slices.SortFunc(policies, func(a, b oriav1alpha1.RBACPolicy) int { return cmp.Compare(a.Name, b.Name) })
	var out []Grant
	for _, p := range policies {
		if p.Spec.ExtensionName != extension {
			continue
		}
		g := policyGrant(&p, s.Now)
		out = append(out, g)
		si, ok := instances[p.Status.ScopeInstanceName]
		if !ok {
			continue
		}
		ig := Grant{Kind: "ScopeInstance", Name: si.Name, Access: string(p.Spec.Access),
			Where: where(si.Status.Scope, si.Status.BoundNamespaces, si.Status.BoundNamespaceCount), Subjects: g.Subjects,
			Window: windowOf(binding.InstanceWindow(si.Spec), s.Now)}
		ig.Ready, ig.Reason, ig.Message = ready(si.Status.Conditions)
		out = append(out, ig)
	}
	return out
}

// policyGrant is the grant of an RBACPolicy, its window judged at now.
func policyGrant(p *oriav1alpha1.RBACPolicy, now time.Time) Grant {
	g := Grant{Kind: "RBACPolicy", Name: p.Name, Access: string(p.Spec.Access),
		Where: where(p.Status.Scope, p.Status.BoundNamespaces, p.Status.BoundNamespaceCount), Subjects: subjectStrings(p.Spec.Subjects),
		Window: windowOf(binding.PolicyWindow(p.Spec), now)}
	g.Ready, g.Reason, g.Message = ready(p.Status.Conditions)
	g.Granted, g.Revoked = records(p.Annotations)
	return g
}

// instanceGrants lists the ScopeInstances that bind the extension's roles
// (by their generated names) through a ScopeTemplate of their own, not one
// compiled from an RBACPolicy; Access names the roles' kinds.
func instanceGrants(s *Snapshot, apis []API) []Grant {
	kinds := map[string]names.RoleKind{}
	for _, api := range apis {
		for _, k := range names.RoleKinds {
			kinds[names.ExtensionRole(api.CRD, k)] = k
		}
	}
	bound := map[string][]string{} // template -> role kinds it binds
	subj := map[string][]string{}  // template -> its subjects
	for _, t := range s.Templates {
		subj[t.Name] = subjectStrings(t.Spec.BindingTemplate.Subjects)
		if ownership.ControllerName(t.OwnerReferences, ownership.KindRBACPolicy) != "" {
			continue
		}
		for _, r := range t.Spec.ClusterRoles {
			if k, ok := kinds[r.Name]; ok && len(r.Rules) == 0 && !slices.Contains(bound[t.Name], string(k)) {
				bound[t.Name] = append(bound[t.Name], string(k))
			}
		}
	}
	var out []Grant
	for _, si := range s.Instances {
		roles, ok := bound[si.Spec.ScopeTemplateName]
		if !ok {
			continue
		}
		g := Grant{Kind: "ScopeInstance", Name: si.Name, Access: strings.Join(roles, "+"),
			Where: where(si.Status.Scope, si.Status.BoundNamespaces, si.Status.BoundNamespaceCount), Subjects: subj[si.Spec.ScopeTemplateName],
			Window: windowOf(binding.InstanceWindow(si.Spec), s.Now)}
		g.Ready, g.Reason, g.Message = ready(si.Status.Conditions)
		g.Granted, g.Revoked = records(si.Annotations)
		g.Request = requestOf(s, &si)
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b Grant) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

func ready(conds []metav1.Condition) (status, reason, message string) {
	c := meta.FindStatusCondition(conds, oriav1alpha1.TypeReady)
	if c == nil {
		return string(metav1.ConditionUnknown), "NotReported", ""
	}
	return string(c.Status), c.Reason, c.Message
}

// Where of a grant that has bound nothing: its status has no scope (it is
// invalid, waits for its extension or roles, or was revoked; its Ready
// condition says which).
const NothingBound = "(nothing bound)"

// where describes the scope of a grant: cluster-wide, the bound namespaces
// (the first few of many), or NothingBound.
func where(scope string, bound []string, count int32) string {
	switch {
	case scope == oriav1alpha1.ScopeCluster:
		return "cluster-wide"
	case scope == "":
		return NothingBound
	case count == 0:
		return "in no namespace"
	}
	const show = 3
	list := strings.Join(bound, ", ")
	if len(bound) > show {
		list = strings.Join(bound[:show], ", ") + ", ..."
	}
	return fmt.Sprintf("in %s: %s", plural(int(count), "namespace"), list)
}

// plural writes "1 namespace", "2 namespaces".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
