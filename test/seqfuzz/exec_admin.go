package seqfuzz

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

var (
	secretsRules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}
	deployRules  = []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create"}}}
)

// roleTemplate is the template entry for a role choice (inline roles are
// named inline).
func (w *World) roleTemplate(choice, inline string) oriav1alpha1.ClusterRoleTemplate {
	switch choice {
	case "inline get secrets":
		return oriav1alpha1.ClusterRoleTemplate{Name: inline, Rules: secretsRules}
	case "inline create deployments":
		return oriav1alpha1.ClusterRoleTemplate{Name: inline, Rules: deployRules}
	case "extension edit":
		return oriav1alpha1.ClusterRoleTemplate{Name: w.env.ExtRole("edit")}
	}
	return oriav1alpha1.ClusterRoleTemplate{Name: choice}
}

// target sets where an instance or policy binds: namespace keys, the
// victims' selector, or (neither) cluster-wide.
func (w *World) target(choice string) (names []string, keys []string, sel *metav1.LabelSelector) {
	switch choice {
	case "selector":
		return nil, nil, w.selector()
	case "cluster-wide":
		return nil, nil, nil
	}
	for _, k := range strings.Fields(strings.Trim(choice, "[]")) {
		keys = append(keys, k)
		names = append(names, w.NS(k))
	}
	return names, keys, nil
}

// window returns a window choice's bounds, in whole seconds from now;
// param spreads the lengths.
func window(choice string, param int, now time.Time) (nb, ea *metav1.Time) {
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(d).Truncate(time.Second)} }
	switch choice {
	case "future (pending)":
		start := time.Duration(4+param%3) * time.Second
		return at(start), at(start + time.Duration(9+param%6)*time.Second)
	case "open now, ending soon":
		return nil, at(time.Duration(9+param%6) * time.Second)
	}
	return nil, nil
}

func timePtr(t *metav1.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := t.Time
	return &v
}

func (w *World) adminGrant(ctx context.Context, s Step, m *Model) string {
	a := w.env.Admin
	now := time.Now()
	names, keys, sel := w.target(pick(adminTargets, s.C))
	nb, ea := window(pick(windowChoices, s.D), s.F, now)
	g := &Grant{Names: keys, Selector: sel != nil, Cluster: sel == nil && names == nil, NB: timePtr(nb), EA: timePtr(ea)}
	if ea != nil {
		g.EndDue = ea.Time
	}
	v := testutil.User(w.Users["V"])
	idx := len(w.Grants)
	if s.A%2 == 1 {
		access := pick(policyAccess, s.B)
		p := &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: w.name("ap")}, Spec: oriav1alpha1.RBACPolicySpec{
			ExtensionName: w.env.Ext, Access: oriav1alpha1.Access(access), Subjects: []rbacv1.Subject{v},
			APIs: []oriav1alpha1.APIRef{{Group: w.env.Group, Resource: w.env.Plural}}, Namespaces: names, NamespaceSelector: sel,
			NotBefore: nb, ExpiresAt: ea}}
		if err := a.Create(ctx, p); err != nil {
			return "admin's policy failed: " + short(err)
		}
		g.Policy, g.Caps = true, roleCaps["extension "+access]
		w.Grants = append(w.Grants, grantRef{Policy: true, Name: p.Name})
		w.Objects = append(w.Objects, objRef{Kind: "RBACPolicy", Name: p.Name, Grant: idx})
		m.AddGrant(g)
		return fmt.Sprintf("grant#%d: RBACPolicy %s", idx, p.Name)
	}
	choice := pick(adminRoleChoices, s.B)
	tmplName := w.name("at")
	ref := grantRef{Template: tmplName, Name: w.name("ai")}
	if strings.HasPrefix(choice, "inline") {
		ref.InlineRole = tmplName + "-r"
	}
	tmpl := testutil.ScopeTemplate(tmplName, []oriav1alpha1.ClusterRoleTemplate{w.roleTemplate(choice, ref.InlineRole)}, v)
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: ref.Name}, Spec: oriav1alpha1.ScopeInstanceSpec{
		ScopeTemplateName: tmplName, Namespaces: names, NamespaceSelector: sel, NotBefore: nb, ExpiresAt: ea}}
	if err := a.Create(ctx, tmpl); err != nil {
		return "admin's template failed: " + short(err)
	}
	w.Objects = append(w.Objects, objRef{Kind: "ScopeTemplate", Name: tmplName, Grant: idx})
	if err := a.Create(ctx, si); err != nil {
		return "admin's instance failed: " + short(err)
	}
	g.Caps = roleCaps[choice]
	w.Grants = append(w.Grants, ref)
	w.Objects = append(w.Objects, objRef{Kind: "ScopeInstance", Name: si.Name, Grant: idx})
	m.AddGrant(g)
	return fmt.Sprintf("grant#%d: ScopeInstance %s of ScopeTemplate %s", idx, si.Name, tmplName)
}

func (w *World) adminRevoke(ctx context.Context, s Step, m *Model, template bool) string {
	i, g, ok := w.grant(s.A)
	if !ok {
		return "no grant: nothing to do"
	}
	var obj client.Object = &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: g.Name}}
	switch {
	case template && g.Policy:
		return "grant is a policy: its template is oria's; nothing to do"
	case template:
		obj = &oriav1alpha1.ScopeTemplate{ObjectMeta: metav1.ObjectMeta{Name: g.Template}}
	case g.Policy:
		obj = &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: g.Name}}
	}
	err := w.env.Admin.Delete(ctx, obj)
	if m.Grants[i].Revoked.IsZero() {
		m.Grants[i].Revoked = time.Now()
	}
	return fmt.Sprintf("deleted %s: %s", obj.GetName(), outcome(err))
}

// edge returns the merge patch of spec for a window edge choice, and the
// window it writes, given the current one.
func edge(choice string, now time.Time, nb, ea *time.Time) (map[string]any, *time.Time, *time.Time) {
	rfc := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	parse := func(s string) *time.Time {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil
		}
		t = oriav1alpha1.ClampInstant(t)
		return &t
	}
	spec := map[string]any{}
	set := func(field, v string) *time.Time { spec[field] = v; return parse(v) }
	switch choice {
	case "expiresAt +1y":
		ea = set("expiresAt", rfc(now.Add(365*24*time.Hour).Truncate(time.Second)))
	case "expiresAt zero time":
		ea = set("expiresAt", "0001-01-01T00:00:00Z")
	case "expiresAt year 0":
		ea = set("expiresAt", "0000-01-01T00:00:00Z")
	case "sub-second window":
		start := now.Add(3 * time.Second).Truncate(time.Second).Add(200 * time.Millisecond)
		nb, ea = set("notBefore", rfc(start)), set("expiresAt", rfc(start.Add(500*time.Millisecond)))
	case "expiresAt +5s":
		ea = set("expiresAt", rfc(now.Add(5*time.Second).Truncate(time.Second)))
	case "no window":
		spec["notBefore"], spec["expiresAt"] = nil, nil
		nb, ea = nil, nil
	case "notBefore zero time":
		nb = set("notBefore", "0001-01-01T00:00:00Z")
	case "expiresAt 1s ago":
		ea = set("expiresAt", rfc(now.Add(-time.Second).Truncate(time.Second)))
	}
	return spec, nb, ea
}

func (w *World) adminWindow(ctx context.Context, s Step, m *Model) string {
	i, g, ok := w.grant(s.A)
	if !ok {
		return "no grant: nothing to do"
	}
	now := time.Now()
	mg := m.Grants[i]
	spec, nb, ea := edge(pick(edgeChoices, s.B), now, mg.NB, mg.EA)
	obj := w.grantObject(g)
	err := w.patchSpec(ctx, w.env.Admin, obj, spec)
	if err == nil {
		m.SetWindow(mg, nb, ea, now)
	}
	return fmt.Sprintf("%s %s: %s", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), outcome(err))
}

func (w *World) grantObject(g grantRef) client.Object {
	if g.Policy {
		return &oriav1alpha1.RBACPolicy{TypeMeta: metav1.TypeMeta{Kind: "RBACPolicy"}, ObjectMeta: metav1.ObjectMeta{Name: g.Name}}
	}
	return &oriav1alpha1.ScopeInstance{TypeMeta: metav1.TypeMeta{Kind: "ScopeInstance"}, ObjectMeta: metav1.ObjectMeta{Name: g.Name}}
}

func (w *World) patchSpec(ctx context.Context, c client.Client, obj client.Object, spec map[string]any) error {
	b, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return err
	}
	return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, b))
}

func (w *World) adminRecreateNS(ctx context.Context, s Step, m *Model) string {
	k := pick(namespaceKeys, s.A)
	a := w.env.Admin
	ns := w.namespace(k, m.NS[k].labelled)
	if err := a.Delete(ctx, ns.DeepCopy()); err != nil {
		return "delete failed: " + short(err)
	}
	start := time.Now()
	for {
		err := a.Get(ctx, client.ObjectKey{Name: ns.Name}, ns.DeepCopy())
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Since(start) > 2*time.Minute {
			return "namespace not gone after 2m"
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := a.Create(ctx, ns); err != nil {
		return "create failed: " + short(err)
	}
	m.Recreated(k)
	return fmt.Sprintf("%s re-created (gone after %s)", ns.Name, time.Since(start).Round(100*time.Millisecond))
}

func (w *World) adminRestoreBase(ctx context.Context, s Step, m *Model) string {
	k := pick([]string{"d", "n"}, s.A)
	persona := map[string]string{"d": "D", "n": "N"}[k]
	err := w.env.Admin.Create(ctx, w.baseBinding(persona, k))
	if err == nil || apierrors.IsAlreadyExists(err) {
		m.RestoreBase(k)
	}
	return fmt.Sprintf("%s admin of %s: %s", persona, w.NS(k), outcome(err))
}

func (w *World) adminToggleLabel(ctx context.Context, s Step, m *Model) string {
	k := pick(namespaceKeys, s.A)
	var v any = w.Prefix
	if m.NS[k].labelled {
		v = nil
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{selectorKey: v}}})
	err := w.env.Admin.Patch(ctx, w.namespace(k, false), client.RawPatch(types.MergePatchType, b))
	if err == nil {
		m.Relabelled(k, time.Now())
	}
	return fmt.Sprintf("%s labelled %v: %s", w.NS(k), v != nil, outcome(err))
}

// outcome is "admitted" or the error, short.
func outcome(err error) string {
	if err == nil {
		return "admitted"
	}
	return "refused: " + short(err)
}

// short is the end of an error's message, the part that says why.
func short(err error) string {
	s := err.Error()
	if i := strings.Index(s, "denied the request: "); i >= 0 {
		s = "guard: " + s[i+len("denied the request: "):]
	}
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}
