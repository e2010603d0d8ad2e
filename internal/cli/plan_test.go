package cli

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/ownership"
)

// planState is a cluster with namespaces a, b and c, argocd in
// FineGrained mode with one API, and the ScopeTemplate "ops" (an inline
// role and the built-in view role, for Group ops) bound in a and b by the
// ScopeInstance "ops".
func planState() (*PlanState, *oriav1alpha1.ScopeTemplate, *oriav1alpha1.ScopeInstance) {
	ops := rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "ops"}
	tmpl := &oriav1alpha1.ScopeTemplate{ObjectMeta: metav1.ObjectMeta{Name: "ops"}, Spec: oriav1alpha1.ScopeTemplateSpec{
		ClusterRoles: []oriav1alpha1.ClusterRoleTemplate{
			{Name: "ops-pods", Rules: []rbacv1.PolicyRule{rule("", "pods", "get")}},
			{Name: "view"},
		},
		BindingTemplate: oriav1alpha1.BindingTemplate{Subjects: []rbacv1.Subject{ops}},
	}}
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "ops"},
		Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: "ops", Namespaces: []string{"a", "b"}}}
	st := &PlanState{
		Namespaces: []binding.Namespace{{Name: "a"}, {Name: "b"}, {Name: "c"}},
		Extensions: []ocv1.ClusterExtension{extension("argocd", "FineGrained", nil)},
		CRDs:       []API{apps},
		CRDOwner:   map[string]string{apps.CRD: "argocd"},
		Templates:  []oriav1alpha1.ScopeTemplate{*tmpl},
		Instances:  []oriav1alpha1.ScopeInstance{*si},
		ClusterRoles: append(derefRoles(binding.ClusterRoles(tmpl)),
			clusterRole("view", nil, rule("", "pods", "get", "list", "watch"))),
	}
	for _, b := range binding.RoleBindings(si, "ops", []string{"ops-pods", "view"}, tmpl.Spec.BindingTemplate.Subjects, []string{"a", "b"}) {
		st.RoleBindings = append(st.RoleBindings, *b)
	}
	return st, tmpl, si
}

func derefRoles(in []*rbacv1.ClusterRole) []rbacv1.ClusterRole {
	out := make([]rbacv1.ClusterRole, len(in))
	for i, r := range in {
		out[i] = *r
	}
	return out
}

func changeLines(r PlanReport) []string {
	var out []string
	for _, c := range r.Changes {
		out = append(out, strings.TrimSpace(strings.Join([]string{c.Action, c.Kind, c.Namespace + "/" + c.Name, c.Role, strings.Join(c.Subjects, ","), c.Detail}, " ")))
	}
	return out
}

func TestPlanInstance(t *testing.T) {
	st, _, si := planState()
	moved := si.DeepCopy()
	moved.Spec.Namespaces = []string{"b", "c", "nope"}
	got := Plan(st, []client.Object{moved}, nil)
	want := []string{
		"delete RoleBinding a/" + binding.BindingName("ops", "ops-pods") + " ops-pods Group ops",
		"delete RoleBinding a/" + binding.BindingName("ops", "view") + " view Group ops",
		"create RoleBinding c/" + binding.BindingName("ops", "ops-pods") + " ops-pods Group ops",
		"create RoleBinding c/" + binding.BindingName("ops", "view") + " view Group ops",
	}
	if d := cmp.Diff(want, changeLines(got)); d != "" {
		t.Errorf("Plan of a moved instance (-want +got):\n%s", d)
	}
	if got.Unchanged != 2 {
		t.Errorf("Unchanged = %d, want 2 (the bindings in b)", got.Unchanged)
	}
	wantTemplates := []PlanTemplate{{Name: "ops", Subjects: []string{"Group ops"}, Instances: []string{"ops"}, Roles: []PlanRole{
		{Name: "ops-pods", Source: RoleInline, Rules: []string{`{apiGroups: [""], resources: ["pods"], verbs: ["get"]}`}},
		{Name: "view", Source: RoleExisting, Rules: []string{`{apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "watch"]}`}},
	}}}
	if d := cmp.Diff(wantTemplates, got.Templates); d != "" {
		t.Errorf("Plan templates (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"ScopeInstance ops: namespaces nope do not exist: bound once they do"}, got.Notes); d != "" {
		t.Errorf("Plan notes (-want +got):\n%s", d)
	}

	// Unchanged: nothing to do.
	if got := Plan(st, []client.Object{si}, nil); len(got.Changes) != 0 || got.Unchanged != 4 {
		t.Errorf("Plan of an unchanged instance: %v, %d unchanged", changeLines(got), got.Unchanged)
	}
	// A missing template: nothing changes, and a note says why.
	orphan := si.DeepCopy()
	orphan.Spec.ScopeTemplateName = "gone"
	if got := Plan(st, []client.Object{orphan}, nil); len(got.Changes) != 0 || len(got.Notes) != 1 {
		t.Errorf("Plan of an instance of a missing template: %v, notes %v", changeLines(got), got.Notes)
	}
}

func TestPlanTemplate(t *testing.T) {
	st, tmpl, _ := planState()
	changed := tmpl.DeepCopy()
	changed.Spec.ClusterRoles[0].Rules = []rbacv1.PolicyRule{rule("", "pods", "get", "delete")}
	changed.Spec.ClusterRoles = append(changed.Spec.ClusterRoles, oriav1alpha1.ClusterRoleTemplate{Name: "edit"})
	changed.Spec.BindingTemplate.Subjects = append(changed.Spec.BindingTemplate.Subjects, testUser("eve"))
	got := Plan(st, []client.Object{changed}, []PlannedObject{{Kind: "ScopeTemplate", Name: "ops", Operation: ActionUpdate, Message: "denied"}})
	pods, view, edit := binding.BindingName("ops", "ops-pods"), binding.BindingName("ops", "view"), binding.BindingName("ops", "edit")
	want := []string{
		`update ClusterRole /ops-pods   {apiGroups: [""], resources: ["pods"], verbs: ["get", "delete"]}`,
		"create RoleBinding a/" + edit + " edit Group ops,User eve",
		"update RoleBinding a/" + pods + " ops-pods Group ops,User eve subjects: +User eve",
		"update RoleBinding a/" + view + " view Group ops,User eve subjects: +User eve",
		"create RoleBinding b/" + edit + " edit Group ops,User eve",
		"update RoleBinding b/" + pods + " ops-pods Group ops,User eve subjects: +User eve",
		"update RoleBinding b/" + view + " view Group ops,User eve subjects: +User eve",
	}
	if d := cmp.Diff(want, changeLines(got)); d != "" {
		t.Errorf("Plan of a changed template (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"ScopeInstance ops: ClusterRole edit does not exist: its bindings grant nothing until it does"}, got.Notes); d != "" {
		t.Errorf("Plan notes (-want +got):\n%s", d)
	}
	header := PlanHeader(&got)
	for _, s := range []string{"ScopeTemplate ops (update): REFUSED: denied", "subjects: Group ops, User eve", "role edit (missing)", "5 to update"} {
		if !strings.Contains(header, s) {
			t.Errorf("PlanHeader has no %q:\n%s", s, header)
		}
	}

	// An inline role whose name a foreign ClusterRole holds is not bound.
	st.ClusterRoles[0].Labels, st.ClusterRoles[0].OwnerReferences = nil, nil
	got = Plan(st, []client.Object{tmpl}, nil)
	for _, c := range got.Changes {
		if c.Action != ActionDelete || c.Role != "ops-pods" {
			t.Errorf("Plan with a foreign ops-pods: %+v", c)
		}
	}
	if len(got.Changes) != 2 || got.Templates[0].Roles[0].Source != RoleConflicts {
		t.Errorf("Plan with a foreign ops-pods: %v, %+v", changeLines(got), got.Templates)
	}
}

func TestPlanPolicy(t *testing.T) {
	st, _, _ := planState()
	devs := rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "devs"}
	pol := &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: "devs"}, Spec: oriav1alpha1.RBACPolicySpec{
		ExtensionName: "argocd", Access: oriav1alpha1.AccessView, Subjects: []rbacv1.Subject{devs}, Namespaces: []string{"a"}}}
	got := Plan(st, []client.Object{pol}, nil)
	view, crdview := apps.CRD+"-view", apps.CRD+"-view-crdview"
	want := []string{
		"create ScopeTemplate /rbacpolicy-devs",
		"create ScopeInstance /rbacpolicy-devs",
		"create RoleBinding a/" + binding.BindingName("rbacpolicy-devs", view) + " " + view + " Group devs",
		"create RoleBinding a/" + binding.BindingName("rbacpolicy-devs", crdview) + " " + crdview + " Group devs",
	}
	if d := cmp.Diff(want, changeLines(got)); d != "" {
		t.Errorf("Plan of a new policy (-want +got):\n%s", d)
	}
	if len(got.Templates) != 1 || got.Templates[0].Roles[0].Source != RoleNotFound {
		t.Errorf("Plan of a new policy: templates %+v", got.Templates)
	}

	// The extension in Unmanaged mode: the compiled objects and their
	// bindings go.
	st.Extensions[0] = extension("argocd", "Unmanaged", nil)
	compiled := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "rbacpolicy-devs",
		OwnerReferences: []metav1.OwnerReference{ownership.Ref(ownership.KindRBACPolicy, "devs", "u")}},
		Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: "rbacpolicy-devs", Namespaces: []string{"a"}}}
	st.Instances = append(st.Instances, *compiled)
	for _, b := range binding.RoleBindings(compiled, "rbacpolicy-devs", []string{view}, []rbacv1.Subject{devs}, []string{"a"}) {
		st.RoleBindings = append(st.RoleBindings, *b)
	}
	got = Plan(st, []client.Object{pol}, nil)
	want = []string{
		"delete ScopeInstance /rbacpolicy-devs",
		"delete RoleBinding a/" + binding.BindingName("rbacpolicy-devs", view) + " " + view + " Group devs",
	}
	if d := cmp.Diff(want, changeLines(got)); d != "" {
		t.Errorf("Plan of a policy of an Unmanaged extension (-want +got):\n%s", d)
	}

	// Invalid subjects: nothing changes.
	bad := pol.DeepCopy()
	bad.Spec.Subjects = []rbacv1.Subject{{Kind: "Robot", Name: "x"}}
	if got := Plan(st, []client.Object{bad}, nil); len(got.Changes) != 0 || len(got.Notes) != 1 {
		t.Errorf("Plan of an invalid policy: %v, notes %v", changeLines(got), got.Notes)
	}
}

func TestDecode(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	objs, skipped, err := Decode(strings.NewReader(`apiVersion: oria.operatorframework.io/v1alpha1
kind: ScopeTemplate
metadata: {name: t}
spec:
  clusterRoles: [{name: view}]
---
---
apiVersion: v1
kind: ConfigMap
metadata: {name: x, namespace: ns}
---
apiVersion: v1
kind: List
items:
- apiVersion: oria.operatorframework.io/v1alpha1
  kind: ScopeInstance
  metadata: {name: i}
  spec: {scopeTemplateName: t}
- apiVersion: oria.operatorframework.io/v1beta1
  kind: ScopeInstance
  metadata: {name: j}
`), "f.yaml", scheme)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].(*oriav1alpha1.ScopeTemplate).Spec.ClusterRoles[0].Name != "view" || objs[1].(*oriav1alpha1.ScopeInstance).Spec.ScopeTemplateName != "t" {
		t.Errorf("Decode = %+v", objs)
	}
	want := []SkippedObject{
		{Kind: "ConfigMap", APIVersion: "v1", Name: "ns/x", Source: "f.yaml", Reason: "not one of oria's kinds: plan takes RBACPolicies, ScopeTemplates and ScopeInstances"},
		{Kind: "ScopeInstance", APIVersion: "oria.operatorframework.io/v1beta1", Name: "j", Source: "f.yaml", Reason: "version v1beta1 of oria.operatorframework.io: plan knows v1alpha1"},
	}
	if d := cmp.Diff(want, skipped); d != "" {
		t.Errorf("skipped (-want +got):\n%s", d)
	}
	for _, bad := range []string{"apiVersion: oria.operatorframework.io/v1alpha1\nkind: ScopeInstance\nspec: {bogus: 1}\n", "apiVersion: oria.operatorframework.io/v1alpha1\nkind: ScopeInstance\nmetadata: {}\n", "{"} {
		if _, _, err := Decode(strings.NewReader(bad), "f.yaml", scheme); err == nil {
			t.Errorf("Decode(%q): no error", bad)
		}
	}
}
