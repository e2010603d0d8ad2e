package seqfuzz

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// tamper marks the admin grant an object belongs to as written by a
// persona (the model then only bounds it from above).
func tamper(m *Model, grant int) {
	if grant >= 0 && grant < len(m.Grants) {
		m.Grants[grant].Tampered = true
	}
}

// roleName resolves a persona's role choice to a ClusterRole name.
func (w *World) roleName(ctx context.Context, choice string, grant int, inline string) (string, oriav1alpha1.ClusterRoleTemplate) {
	switch choice {
	case "the gate of grant":
		if gate := w.gateName(ctx, grant); gate != "" {
			return gate, oriav1alpha1.ClusterRoleTemplate{Name: gate}
		}
		return "view", oriav1alpha1.ClusterRoleTemplate{Name: "view"}
	case "the inline role of grant":
		if _, g, ok := w.grant(grant); ok && g.InlineRole != "" {
			return g.InlineRole, oriav1alpha1.ClusterRoleTemplate{Name: g.InlineRole}
		}
		return "view", oriav1alpha1.ClusterRoleTemplate{Name: "view"}
	}
	rt := w.roleTemplate(choice, inline)
	return rt.Name, rt
}

func (w *World) dGrant(ctx context.Context, s Step, m *Model) string {
	d := w.Clients["D"]
	tmplName, squat := w.name("dt"), -1
	if s.F%3 == 2 {
		if i, g, ok := w.grant(s.E); ok && !g.Policy {
			tmplName, squat = g.Template, i
		}
	}
	role, rt := w.roleName(ctx, pick(dRoleChoices, s.A), s.E, tmplName+"-r")
	tmpl := testutil.ScopeTemplate(tmplName, []oriav1alpha1.ClusterRoleTemplate{rt}, testutil.User(w.Users[pick(subjectChoices, s.B)]))
	terr := d.Create(ctx, tmpl)
	if terr == nil {
		w.Objects = append(w.Objects, objRef{Kind: "ScopeTemplate", Name: tmplName, Grant: -1})
		tamper(m, squat)
	}
	names, _, sel := w.target(pick(dTargets, s.C))
	nb, ea := window(pick(windowChoices, s.D), s.F, time.Now())
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: w.name("di")}, Spec: oriav1alpha1.ScopeInstanceSpec{
		ScopeTemplateName: tmplName, Namespaces: names, NamespaceSelector: sel, NotBefore: nb, ExpiresAt: ea}}
	ierr := d.Create(ctx, si)
	if ierr == nil {
		w.Objects = append(w.Objects, objRef{Kind: "ScopeInstance", Name: si.Name, Grant: -1})
	}
	return fmt.Sprintf("template %s [%s]: %s; instance %s: %s", tmplName, role, outcome(terr), si.Name, outcome(ierr))
}

func (w *World) dInstanceOf(ctx context.Context, s Step) string {
	_, g, ok := w.grant(s.A)
	if !ok {
		return "no grant: nothing to do"
	}
	tmpl := g.Template
	if g.Policy {
		si, err := w.instanceOf(ctx, g)
		if err != nil {
			return short(err)
		}
		tmpl = si.Spec.ScopeTemplateName
	}
	names, _, sel := w.target(pick(dTargets, s.C))
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: w.name("di")}, Spec: oriav1alpha1.ScopeInstanceSpec{
		ScopeTemplateName: tmpl, Namespaces: names, NamespaceSelector: sel}}
	err := w.Clients["D"].Create(ctx, si)
	if err == nil {
		w.Objects = append(w.Objects, objRef{Kind: "ScopeInstance", Name: si.Name, Grant: -1})
	}
	return fmt.Sprintf("instance %s of %s: %s", si.Name, tmpl, outcome(err))
}

// object returns a typed, named object for a reference.
func object(o objRef) client.Object {
	meta := metav1.ObjectMeta{Name: o.Name}
	switch o.Kind {
	case "ScopeTemplate":
		return &oriav1alpha1.ScopeTemplate{ObjectMeta: meta}
	case "RBACPolicy":
		return &oriav1alpha1.RBACPolicy{ObjectMeta: meta}
	}
	return &oriav1alpha1.ScopeInstance{ObjectMeta: meta}
}

func (w *World) dWindow(ctx context.Context, s Step, m *Model) string {
	o, ok := w.pickObject(s.A, "ScopeInstance", "RBACPolicy")
	if !ok {
		return "no object: nothing to do"
	}
	spec, _, _ := edge(pick(edgeChoices, s.B), time.Now(), nil, nil)
	err := w.patchSpec(ctx, w.Clients["D"], object(o), spec)
	if err == nil {
		tamper(m, o.Grant)
	}
	return fmt.Sprintf("%s %s: %s", o.Kind, o.Name, outcome(err))
}

func (w *World) dNamespaces(ctx context.Context, s Step, m *Model) string {
	o, ok := w.pickObject(s.A, "ScopeInstance", "RBACPolicy")
	if !ok {
		return "no object: nothing to do"
	}
	var names []string
	for _, k := range pick(nsListChoices, s.B) {
		names = append(names, w.NS(k))
	}
	err := w.patchSpec(ctx, w.Clients["D"], object(o), map[string]any{"namespaces": names, "namespaceSelector": nil})
	if err == nil {
		tamper(m, o.Grant)
	}
	return fmt.Sprintf("%s %s: %s", o.Kind, o.Name, outcome(err))
}

func (w *World) dDelete(ctx context.Context, s Step, m *Model) string {
	o, ok := w.pickObject(s.A, "ScopeTemplate", "ScopeInstance", "RBACPolicy")
	if !ok {
		return "no object: nothing to do"
	}
	err := w.Clients["D"].Delete(ctx, object(o))
	if err == nil {
		tamper(m, o.Grant)
	}
	return fmt.Sprintf("%s %s: %s", o.Kind, o.Name, outcome(err))
}

func (w *World) dMeta(ctx context.Context, s Step, m *Model) string {
	o, ok := w.pickObject(s.A, "ScopeTemplate", "ScopeInstance", "RBACPolicy")
	if !ok {
		return "no object: nothing to do"
	}
	meta := map[string]any{}
	switch s.B % len(metaChoices) {
	case 0:
		policy := w.Prefix + "-none"
		if p, ok := w.pickObject(0, "RBACPolicy"); ok {
			policy = p.Name
		}
		meta["labels"] = map[string]any{oriav1alpha1.LabelRBACPolicy: policy}
	case 1:
		meta["labels"] = map[string]any{oriav1alpha1.LabelManagedBy: oriav1alpha1.ManagedByValue}
	case 2:
		meta["annotations"] = map[string]any{oriav1alpha1.AnnotationGateRoles: "admin"}
	case 3:
		meta["labels"] = nil
	}
	b, _ := json.Marshal(map[string]any{"metadata": meta})
	err := w.Clients["D"].Patch(ctx, object(o), client.RawPatch(types.MergePatchType, b))
	if err == nil {
		tamper(m, o.Grant)
	}
	return fmt.Sprintf("%s %s: %s", o.Kind, o.Name, outcome(err))
}

func (w *World) dPolicy(ctx context.Context, s Step) string {
	names, _, sel := w.target(pick(dTargets, s.C))
	nb, ea := window(pick(windowChoices, s.D), s.F, time.Now())
	p := &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: w.name("dp")}, Spec: oriav1alpha1.RBACPolicySpec{
		ExtensionName: w.env.Ext, Access: oriav1alpha1.Access(pick(policyAccess[:2], s.A)),
		Subjects: []rbacv1.Subject{testutil.User(w.Users[pick(subjectChoices, s.B)])},
		APIs:     []oriav1alpha1.APIRef{{Group: w.env.Group, Resource: w.env.Plural}}, Namespaces: names, NamespaceSelector: sel,
		NotBefore: nb, ExpiresAt: ea}}
	err := w.Clients["D"].Create(ctx, p)
	if err == nil {
		w.Objects = append(w.Objects, objRef{Kind: "RBACPolicy", Name: p.Name, Grant: -1})
	}
	return fmt.Sprintf("RBACPolicy %s: %s", p.Name, outcome(err))
}

func (w *World) nBind(ctx context.Context, s Step) string {
	role, _ := w.roleName(ctx, pick(nRoleChoices, s.A), s.E, "")
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: w.name("nb"), Namespace: w.NS("n")},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{testutil.User(w.Users[pick(nSubjects, s.B)])}}
	err := w.Clients["N"].Create(ctx, rb)
	return fmt.Sprintf("RoleBinding %s of %s: %s", rb.Name, role, outcome(err))
}

// cWrite patches the metadata of a ClusterRole as C.
func (w *World) cWrite(ctx context.Context, name string, meta map[string]any) error {
	b, _ := json.Marshal(map[string]any{"metadata": meta})
	return w.Clients["C"].Patch(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, b))
}

func (w *World) cAnnotate(ctx context.Context, s Step, m *Model) string {
	i, _, _ := w.grant(s.A)
	gate := w.gateName(ctx, s.A)
	if gate == "" {
		return "no gate: nothing to do"
	}
	err := w.cWrite(ctx, gate, map[string]any{"annotations": map[string]any{oriav1alpha1.AnnotationGateRoles: pick(gateAnnots, s.B)}})
	if err == nil {
		tamper(m, i)
	}
	return fmt.Sprintf("%s: %s", gate, outcome(err))
}

func (w *World) cSquat(ctx context.Context, s Step, m *Model) string {
	i, _, _ := w.grant(s.A)
	gate := w.gateName(ctx, s.A)
	if gate == "" {
		return "no gate: nothing to do"
	}
	err := w.Clients["C"].Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: gate}})
	if err == nil {
		w.roles = append(w.roles, gate)
		tamper(m, i)
	}
	return fmt.Sprintf("%s: %s", gate, outcome(err))
}

func (w *World) cLabel(ctx context.Context, s Step, m *Model) string {
	i, g, ok := w.grant(s.A)
	if !ok {
		return "no grant: nothing to do"
	}
	name := w.gateName(ctx, s.A)
	labels := map[string]any{oriav1alpha1.LabelAggregateToEdit: "true"}
	switch s.B % len(cLabelChoices) {
	case 1:
		labels = map[string]any{oriav1alpha1.LabelScopeInstance: nil, oriav1alpha1.LabelManaged: nil, oriav1alpha1.LabelManagedBy: nil}
	case 2:
		name = g.InlineRole
	}
	if name == "" {
		return "no such role: nothing to do"
	}
	err := w.cWrite(ctx, name, map[string]any{"labels": labels})
	if err == nil {
		tamper(m, i)
	}
	return fmt.Sprintf("%s: %s", name, outcome(err))
}

// statusInstance resolves an instance index for S: the run's instances and
// its policies' compiled ones.
func (w *World) statusInstance(ctx context.Context, i int) (*oriav1alpha1.ScopeInstance, int, bool) {
	o, ok := w.pickObject(i, "ScopeInstance", "RBACPolicy")
	if !ok {
		return nil, 0, false
	}
	g := grantRef{Name: o.Name, Policy: o.Kind == "RBACPolicy"}
	si, err := w.instanceOf(ctx, g)
	return si, o.Grant, err == nil
}

func (w *World) sStatus(ctx context.Context, s Step, m *Model) string {
	si, grant, ok := w.statusInstance(ctx, s.A)
	if !ok {
		return "no instance: nothing to do"
	}
	status := map[string]any{}
	if s.Op == OpSPinUIDs {
		uids := map[string]string{}
		for _, n := range si.Spec.Namespaces {
			ns := testutil.Namespace(n, nil)
			if err := w.env.Admin.Get(ctx, client.ObjectKeyFromObject(ns), ns); err == nil {
				uids[n] = string(ns.UID)
			}
		}
		status["namespaceUIDs"] = uids
	} else {
		status["observedGeneration"] = si.Generation - 1
	}
	b, _ := json.Marshal(map[string]any{"status": status})
	err := w.Clients["S"].Status().Patch(ctx, si, client.RawPatch(types.MergePatchType, b))
	if err == nil {
		tamper(m, grant)
	}
	return fmt.Sprintf("ScopeInstance %s %v: %s", si.Name, status, outcome(err))
}
