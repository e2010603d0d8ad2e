package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
)

// TestPlanUnread (issue 38): a requester who may not list namespaces, nor
// RoleBindings, gets the bindings in the namespaces the instance names
// (one of them taken to exist: they may not get it either), each as to
// create, with notes and a summary line that say what is unknown; a
// selector's namespaces are unknown, never "0 to create" in silence.
func TestPlanUnread(t *testing.T) {
	st, _, si := planState()
	st.Namespaces = []binding.Namespace{{Name: "b"}, {Name: "c"}} // b read by a get, c assumed
	st.Assumed, st.Unread, st.Requester = []string{"c"}, []string{ListNamespaces, ListRoleBindings}, `User "d"`
	st.RoleBindings = nil
	moved := si.DeepCopy()
	moved.Spec.Namespaces = []string{"b", "c"}
	got := Plan(st, []client.Object{moved}, []PlannedObject{{Kind: "ScopeInstance", Name: "ops", Operation: ActionUpdate, Admitted: true}})
	pods, view := binding.BindingName("ops", "ops-pods"), binding.BindingName("ops", "view")
	want := []string{
		"create RoleBinding b/" + pods + " ops-pods Group ops",
		"create RoleBinding b/" + view + " view Group ops",
		"create RoleBinding c/" + pods + " ops-pods Group ops",
		"create RoleBinding c/" + view + " view Group ops",
	}
	if d := cmp.Diff(want, changeLines(got)); d != "" {
		t.Errorf("Plan as a requester who may not list namespaces (-want +got):\n%s", d)
	}
	wantNotes := []string{
		`User "d" may not list namespaces: ` + unreadWhat[ListNamespaces],
		`User "d" may not list rolebindings: ` + unreadWhat[ListRoleBindings],
		`ScopeInstance ops: User "d" may neither list namespaces nor get c: taken to exist (oria binds only in namespaces that do)`,
	}
	if d := cmp.Diff(wantNotes, got.Notes); d != "" {
		t.Errorf("notes (-want +got):\n%s", d)
	}
	header := PlanHeader(&got)
	for _, s := range []string{
		"\n4 to create, 0 to update, 0 to delete, 0 unchanged (as User \"d\", who may not list namespaces, rolebindings: see the notes)\n",
		"Note: User \"d\" may not list namespaces: the namespaces below are those the instances name (spec.namespaces)",
	} {
		if !strings.Contains(header, s) {
			t.Errorf("PlanHeader has no %q:\n%s", s, header)
		}
	}

	// A selector: its namespaces are unknown, and said to be.
	sel := si.DeepCopy()
	sel.Spec.Namespaces, sel.Spec.NamespaceSelector = nil, &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}
	got = Plan(st, []client.Object{sel}, nil)
	if len(got.Changes) != 0 || !strings.Contains(strings.Join(got.Notes, "\n"),
		`ScopeInstance ops: User "d" may not list namespaces: which namespaces spec.namespaceSelector selects is unknown, and its bindings are not computed`) {
		t.Errorf("Plan of a selector as a requester who may not list namespaces: %v, notes %q", changeLines(got), got.Notes)
	}

	// ClusterRoles unread: the built-in view is unknown, not missing.
	st, _, si = planState()
	st.ClusterRoles, st.Unread = nil, []string{ListClusterRoles}
	got = Plan(st, []client.Object{si}, nil)
	if got.Templates[0].Roles[1].Source != RoleUnknown {
		t.Errorf("a role the requester may not read: %+v", got.Templates[0].Roles[1])
	}
	for _, n := range got.Notes {
		if strings.Contains(n, "does not exist") {
			t.Errorf("a role the requester may not read is said not to exist: %q", n)
		}
	}
}

// TestPlanJudged (issue 42): what an object the API server refuses would
// write is listed as REFUSED and not counted; an admitted object's changes
// count.
func TestPlanJudged(t *testing.T) {
	st, tmpl, si := planState()
	moved := si.DeepCopy()
	moved.Spec.Namespaces = []string{"a", "b", "c"}
	changed := tmpl.DeepCopy()
	changed.Spec.BindingTemplate.Subjects = append(changed.Spec.BindingTemplate.Subjects, testUser("eve"))
	other := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "other"},
		Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: "ops", Namespaces: []string{"c"}}}
	verdicts := []PlannedObject{
		{Kind: "ScopeTemplate", Name: "ops", Operation: ActionUpdate, Message: "denied"},
		{Kind: "ScopeInstance", Name: "other", Operation: ActionCreate, Admitted: true},
	}
	got := PlanJudged(st, []client.Object{changed, other}, verdicts)
	pods, view := binding.BindingName("ops", "ops-pods"), binding.BindingName("ops", "view")
	opods, oview := binding.BindingName("other", "ops-pods"), binding.BindingName("other", "view")
	var lines []string
	for _, c := range got.Changes {
		lines = append(lines, actionOf(c)+" "+c.Namespace+"/"+c.Name+" "+strings.Join(c.Subjects, ","))
	}
	want := []string{
		"REFUSED update a/" + pods + " Group ops,User eve",
		"REFUSED update a/" + view + " Group ops,User eve",
		"REFUSED update b/" + pods + " Group ops,User eve",
		"REFUSED update b/" + view + " Group ops,User eve",
		"create c/" + opods + " Group ops",
		"REFUSED create c/" + opods + " Group ops,User eve",
		"create c/" + oview + " Group ops",
		"REFUSED create c/" + oview + " Group ops,User eve",
	}
	if d := cmp.Diff(want, lines); d != "" {
		t.Errorf("PlanJudged (-want +got):\n%s", d)
	}
	if got.Unchanged != 0 {
		t.Errorf("Unchanged = %d, want 0 (the admitted instance's bindings are all new)", got.Unchanged)
	}
	header := PlanHeader(&got)
	if s := "\n2 to create, 0 to update, 0 to delete, 0 unchanged; 6 REFUSED (not written)\n"; !strings.Contains(header, s) {
		t.Errorf("PlanHeader has no %q:\n%s", s, header)
	}
	// Every object admitted: Plan itself.
	verdicts[0].Admitted = true
	if d := cmp.Diff(Plan(st, []client.Object{changed, moved}, verdicts), PlanJudged(st, []client.Object{changed, moved}, verdicts)); d != "" {
		t.Errorf("PlanJudged of admitted objects differs from Plan:\n%s", d)
	}
}

// TestPlanNames (issue 42): -o name prints one line per object that
// exists, with its namespace: two same-named RoleBindings deleted in a and
// b are two lines; the objects to create are counted, not listed; a
// refused change is not listed.
func TestPlanNames(t *testing.T) {
	st, _, si := planState()
	moved := si.DeepCopy()
	moved.Spec.Namespaces = []string{"c"}
	got := PlanJudged(st, []client.Object{moved}, []PlannedObject{{Kind: "ScopeInstance", Name: "ops", Operation: ActionUpdate, Admitted: true}})
	names, creates := PlanNames(&got)
	pods, view := binding.BindingName("ops", "ops-pods"), binding.BindingName("ops", "view")
	want := []string{
		"scopeinstance.oria.operatorframework.io/ops",
		"-n a rolebinding.rbac.authorization.k8s.io/" + pods,
		"-n a rolebinding.rbac.authorization.k8s.io/" + view,
		"-n b rolebinding.rbac.authorization.k8s.io/" + pods,
		"-n b rolebinding.rbac.authorization.k8s.io/" + view,
	}
	if d := cmp.Diff(want, names); d != "" {
		t.Errorf("PlanNames (-want +got):\n%s", d)
	}
	if creates != 2 {
		t.Errorf("creates = %d, want 2 (in c)", creates)
	}
	got = PlanJudged(st, []client.Object{moved}, []PlannedObject{{Kind: "ScopeInstance", Name: "ops", Operation: ActionUpdate}})
	if names, creates := PlanNames(&got); len(names) != 0 || creates != 0 {
		t.Errorf("PlanNames of a refused change: %q, %d to create", names, creates)
	}
}

// TestPlanWindowsPrint (issue 42): a window that never opens says so; a
// ServiceAccount subject without a namespace is bound in each namespace,
// never "ServiceAccount /name".
func TestPlanWindowsPrint(t *testing.T) {
	st, _, si := planState()
	st.Now = windowNow
	never := si.DeepCopy()
	never.Spec.NotBefore, never.Spec.ExpiresAt = at(time.Hour), at(-time.Hour)
	got := Plan(st, []client.Object{never}, nil)
	wantNotes := []string{"ScopeInstance ops never grants: spec.expiresAt (2025-06-06T15:00:00Z) is not after spec.notBefore (2025-06-06T17:00:00Z)"}
	if d := cmp.Diff(wantNotes, got.Notes); d != "" {
		t.Errorf("notes of an empty window (-want +got):\n%s", d)
	}
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "deployer"}
	if d := cmp.Diff([]string{"ServiceAccount <namespace>/deployer", "ServiceAccount ci/bot"},
		templateSubjects([]rbacv1.Subject{sa, {Kind: rbacv1.ServiceAccountKind, Name: "bot", Namespace: "ci"}})); d != "" {
		t.Errorf("templateSubjects (-want +got):\n%s", d)
	}
}
