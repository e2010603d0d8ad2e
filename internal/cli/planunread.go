package cli

import (
	"cmp"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// What a plan leaves unknown when its requester may not read a list
// (PlanState.Unread): plan judges a file as the requester, as kubectl apply
// would, and never shows what it could not read as "nothing".

// unreadWhat says, per list, what not reading it leaves unknown.
var unreadWhat = map[string]string{
	ListNamespaces: "the namespaces below are those the instances name (spec.namespaces), each read on its own where allowed; " +
		"which namespaces a namespaceSelector selects is unknown",
	ListExtensions:   "what RBACPolicies compile into is not computed",
	ListCRDs:         "what RBACPolicies compile into is not computed",
	ListTemplates:    "ScopeTemplates that are not in the files are unknown",
	ListInstances:    "ScopeInstances that are not in the files are unknown: what a changed ScopeTemplate changes for the instances that bind it is not shown",
	ListClusterRoles: "the rules of the ClusterRoles the templates name are unknown, and whether oria's roles and gates exist already (they are shown as to create)",
	ListRoleBindings: "whether each RoleBinding below exists already is unknown (each is shown as to create), " +
		"and the stale ones oria would delete are not shown",
	ListClusterRoleBindings: "whether each ClusterRoleBinding below exists already is unknown (each is shown as to create), " +
		"and the stale ones oria would delete are not shown",
}

// unreadNotes records the lists the requester may not read, and a note
// for each that matters to objs (ClusterExtensions and CRDs only to
// RBACPolicies).
func (p *planner) unreadNotes(objs []client.Object) {
	p.report.Unread, p.report.As = slices.Clone(p.st.Unread), p.st.Requester
	policies := slices.ContainsFunc(objs, func(o client.Object) bool {
		_, ok := o.(*oriav1alpha1.RBACPolicy)
		return ok
	})
	for _, l := range p.st.Unread {
		if policies || (l != ListExtensions && l != ListCRDs) {
			p.note("%s may not list %s: %s", p.requester(), l, unreadWhat[l])
		}
	}
}

func (p *planner) requester() string { return cmp.Or(p.st.Requester, "you") }

// unread reports whether the requester may not read list.
func (p *planner) unread(list string) bool { return slices.Contains(p.st.Unread, list) }

// unreadOf says which of lists the requester may not read ("User "d" may
// not list clusterextensions"), "" when they may read all.
func (p *planner) unreadOf(lists ...string) string {
	var out []string
	for _, l := range lists {
		if p.unread(l) {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return ""
	}
	return p.requester() + " may not list " + strings.Join(out, ", ")
}

// unknownTargets says why the targets of si are unknown to the requester
// (with a note), or that some are taken to exist (a note too); false when
// they cannot be computed.
func (p *planner) unknownTargets(si *oriav1alpha1.ScopeInstance) bool {
	if !p.unread(ListNamespaces) {
		return true
	}
	if si.Spec.NamespaceSelector != nil {
		p.note("ScopeInstance %s: %s may not list namespaces: which namespaces spec.namespaceSelector selects is unknown, and its bindings are not computed",
			si.Name, p.requester())
		return false
	}
	var assumed []string
	for _, n := range si.Spec.Namespaces {
		if slices.Contains(p.st.Assumed, n) {
			assumed = append(assumed, n)
		}
	}
	if len(assumed) > 0 {
		p.note("ScopeInstance %s: %s may neither list namespaces nor get %s: taken to exist (oria binds only in namespaces that do)",
			si.Name, p.requester(), strings.Join(assumed, ", "))
	}
	return true
}
