package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/ownership"
	policymodel "github.com/operator-framework/oria/internal/policy"
)

// gatedInstance is the ScopeInstance compiled from the RBACPolicy "devs":
// time-bound (notBefore, expiresAt) over the namespaces labelled team=x,
// so it binds its gate (binding.Gated).
func gatedInstance(notBefore, expiresAt *metav1.Time) *oriav1alpha1.ScopeInstance {
	return &oriav1alpha1.ScopeInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "rbacpolicy-devs", UID: "uid-devs",
			OwnerReferences: []metav1.OwnerReference{ownership.Ref(ownership.KindRBACPolicy, "devs", "uid-policy")}},
		Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: "rbacpolicy-devs", NotBefore: notBefore, ExpiresAt: expiresAt,
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}},
	}
}

// gateAndBindings are si's gate (holding the rules of the view role of
// apps when filled) and its RoleBindings in nss, for devs, as the
// ScopeInstance controller makes them.
func gateAndBindings(si *oriav1alpha1.ScopeInstance, filled bool, nss ...string) (rbacv1.ClusterRole, []rbacv1.RoleBinding) {
	gate := binding.GateRole(si, []binding.GateSource{{Name: apps.CRD + "-view", Rules: []rbacv1.PolicyRule{rule("argoproj.io", "applications", "get", "list", "watch")}}}, filled)
	var rbs []rbacv1.RoleBinding
	for _, b := range binding.RoleBindings(si, si.Spec.ScopeTemplateName, []string{gate.Name}, []rbacv1.Subject{devs}, nss) {
		rbs = append(rbs, *b)
	}
	return *gate, rbs
}

// TestCandidatesGate: a RoleBinding to a gate is oria's binding for the
// instance (its via names the RBACPolicy and the window), and the gate's
// rules are what it grants: an empty gate (before the window) gives no
// access, one that still holds rules out of the window is shown, and said
// to be so.
func TestCandidatesGate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		si     *oriav1alpha1.ScopeInstance
		filled bool
		want   string // the via of each candidate; none when ""
	}{
		{name: "open", si: gatedInstance(at(-time.Hour), at(2*time.Hour)), filled: true,
			want: "RBACPolicy devs (until 2025-06-06T18:00:00Z (2h left))"},
		{name: "pending, the gate empty", si: gatedInstance(at(time.Hour), at(2*time.Hour))},
		{name: "pending, the gate not emptied", si: gatedInstance(at(time.Hour), at(2*time.Hour)), filled: true,
			want: "RBACPolicy devs (pending, from 2025-06-06T17:00:00Z (in 60m) until 2025-06-06T18:00:00Z: its gate, ClusterRole " +
				binding.GateName("rbacpolicy-devs", "uid-devs") + ", still holds rules: oria has not emptied it yet)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gate, rbs := gateAndBindings(tc.si, tc.filled, "team-a", "team-b")
			s := &Snapshot{Now: windowNow, ClusterRoles: []rbacv1.ClusterRole{gate}, RoleBindings: rbs, Instances: []oriav1alpha1.ScopeInstance{*tc.si}}
			var want []Candidate
			if tc.want != "" {
				for _, rb := range rbs {
					want = append(want, Candidate{Subject: rb.Subjects[0], Namespace: rb.Namespace, Via: tc.want, Binding: "RoleBinding " + rb.Namespace + "/" + rb.Name,
						APIs: []string{apps.CRD}, Window: windowOf(binding.InstanceWindow(tc.si.Spec), windowNow)})
				}
			}
			got := Candidates(s, []API{apps}, "")
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("Candidates (-want +got):\n%s", d)
			}
			if tc.want == "" {
				return
			}
			// can: the rows name the policy, through the gate's bindings.
			az := fakeAuthorizer{}
			grant(az, devs, "team-a", "applications", "get", "list", "watch")
			rows, err := ConfirmFor(context.Background(), az, UserIdentity("bob", []string{"developers"}), got, []API{apps},
				map[string]string{apps.CRD: "argocd"}, "team-a")
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 1 || rows[0].Level != LevelView || !cmp.Equal(rows[0].Via, []string{tc.want + " (Group developers)"}) ||
				!cmp.Equal(rows[0].Bindings, []string{"RoleBinding team-a/" + rbs[0].Name}) {
				t.Errorf("ConfirmFor = %+v", rows)
			}
		})
	}
}

// gatedPlanState is planState at windowNow with the namespaces a and b
// labelled team=x, apps' view roles, and the RBACPolicy "devs": view on
// argocd for devs over team=x, in the window [notBefore, expiresAt). When
// live, the cluster holds what it compiles into, the instance with the UID
// uid-devs, and its gate (filled or not) bound in a and b, as oria leaves
// them; gate is the gate's name.
func gatedPlanState(notBefore, expiresAt *metav1.Time, filled, live bool) (st *PlanState, pol *oriav1alpha1.RBACPolicy, gate string) {
	st, _, _ = planState()
	st.Now = windowNow
	st.Namespaces = []binding.Namespace{{Name: "a", Labels: map[string]string{"team": "x"}}, {Name: "b", Labels: map[string]string{"team": "x"}}, {Name: "c"}}
	view := clusterRole(apps.CRD+"-view", nil, rule("argoproj.io", "applications", "get", "list", "watch"))
	crdview := clusterRole(apps.CRD+"-view-crdview", nil, rule("apiextensions.k8s.io", "customresourcedefinitions", "get"))
	st.ClusterRoles = append(st.ClusterRoles, view, crdview)
	pol = &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: "devs", UID: "uid-policy"}, Spec: oriav1alpha1.RBACPolicySpec{
		ExtensionName: "argocd", Access: oriav1alpha1.AccessView, Subjects: []rbacv1.Subject{devs},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}, NotBefore: notBefore, ExpiresAt: expiresAt}}
	if !live {
		return st, pol, ""
	}
	c := policymodel.Compile(pol, []string{apps.CRD})
	si := c.Instance.DeepCopy()
	si.UID = "uid-devs"
	st.Templates, st.Instances = append(st.Templates, *c.Template), append(st.Instances, *si)
	g := binding.GateRole(si, []binding.GateSource{{Name: view.Name, Rules: view.Rules}, {Name: crdview.Name, Rules: crdview.Rules}}, filled)
	st.ClusterRoles = append(st.ClusterRoles, *g)
	for _, b := range binding.RoleBindings(si, c.Template.Name, []string{g.Name}, c.Template.Spec.BindingTemplate.Subjects, []string{"a", "b"}) {
		st.RoleBindings = append(st.RoleBindings, *b)
	}
	return st, pol, g.Name
}

// TestPlanGated: the plan of a gated instance predicts RoleBindings to its
// gate, not one per role: a live pending instance with its empty gate and
// its bindings is unchanged; at notBefore the gate is filled (one update);
// an expired one loses its bindings and its gate; a new one names its
// gate by the instance alone, and says so.
func TestPlanGated(t *testing.T) {
	gate := binding.GateName("rbacpolicy-devs", "uid-devs")
	bound := binding.BindingName("rbacpolicy-devs", gate)
	rules := `{apiGroups: ["argoproj.io"], resources: ["applications"], verbs: ["get", "list", "watch"]} ` +
		`{apiGroups: ["apiextensions.k8s.io"], resources: ["customresourcedefinitions"], verbs: ["get"]}`
	placeholder := "(gate of ScopeInstance rbacpolicy-devs)"
	for _, tc := range []struct {
		name               string
		notBefore, expires *metav1.Time
		filled, live       bool
		want               []string
		unchanged          int
		note               string
	}{
		{name: "pending, as oria left it", notBefore: at(time.Hour), expires: at(2 * time.Hour), live: true,
			unchanged: 5, // the compiled template and instance, the gate, its 2 bindings
			note: "its bindings are made now, to its gate, ClusterRole " + gate + ", which holds no rule until 2025-06-06T17:00:00Z (spec.notBefore); " +
				"oria fills it then with the rules of its ScopeTemplate's roles, and empties it at 2025-06-06T18:00:00Z (spec.expiresAt): " +
				strings.ReplaceAll(rules, "} {", "}; {")},
		{name: "open, the gate still empty", notBefore: at(-time.Hour), expires: at(2 * time.Hour), live: true,
			unchanged: 4, want: []string{"update ClusterRole /" + gate + "   " + rules}},
		{name: "open, as oria left it", notBefore: at(-time.Hour), expires: at(2 * time.Hour), live: true, filled: true, unchanged: 5,
			note: "through its gate, ClusterRole " + gate + "; oria empties the gate then"},
		{name: "expired", expires: at(-time.Minute), live: true, filled: true, unchanged: 2, want: []string{
			"delete ClusterRole /" + gate + "   " + rules,
			"delete RoleBinding a/" + bound + " " + gate + " Group developers",
			"delete RoleBinding b/" + bound + " " + gate + " Group developers",
		}},
		{name: "not created yet", notBefore: at(time.Hour), expires: at(2 * time.Hour), want: []string{
			"create ScopeTemplate /rbacpolicy-devs",
			"create ScopeInstance /rbacpolicy-devs",
			"create ClusterRole /" + placeholder + "   no rule until 2025-06-06T17:00:00Z, then " + rules,
			"create RoleBinding a/(binding of the gate of ScopeInstance rbacpolicy-devs) " + placeholder + " Group developers",
			"create RoleBinding b/(binding of the gate of ScopeInstance rbacpolicy-devs) " + placeholder + " Group developers",
		}, note: "ScopeInstance rbacpolicy-devs does not exist yet: a time-bound grant over many namespaces binds, in each of them, " +
			"one ClusterRole of its own per instance, its gate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, pol, _ := gatedPlanState(tc.notBefore, tc.expires, tc.filled, tc.live)
			got := Plan(st, []client.Object{pol}, nil)
			if d := cmp.Diff(tc.want, changeLines(got)); d != "" {
				t.Errorf("Plan (-want +got):\n%s", d)
			}
			if got.Unchanged != tc.unchanged {
				t.Errorf("Unchanged = %d, want %d", got.Unchanged, tc.unchanged)
			}
			if tc.note != "" && !strings.Contains(strings.Join(got.Notes, "\n"), tc.note) {
				t.Errorf("Plan notes have no %q:\n%s", tc.note, strings.Join(got.Notes, "\n"))
			}
		})
	}

	// An instance that was bound role by role becomes gated: its gate is
	// created and bound, its bindings of each role go.
	st, pol, _ := gatedPlanState(at(-time.Hour), at(2*time.Hour), true, true)
	si := &st.Instances[len(st.Instances)-1]
	var perRole []rbacv1.RoleBinding
	for _, b := range binding.RoleBindings(si, si.Spec.ScopeTemplateName, []string{apps.CRD + "-view"}, []rbacv1.Subject{devs}, []string{"a"}) {
		perRole = append(perRole, *b)
	}
	st.RoleBindings = append(st.RoleBindings[:len(st.RoleBindings)-2], perRole...)
	st.ClusterRoles = st.ClusterRoles[:len(st.ClusterRoles)-1]
	want := []string{
		"create ClusterRole /" + gate + "   " + rules,
		"delete RoleBinding a/" + binding.BindingName("rbacpolicy-devs", apps.CRD+"-view") + " " + apps.CRD + "-view Group developers",
		"create RoleBinding a/" + bound + " " + gate + " Group developers",
		"create RoleBinding b/" + bound + " " + gate + " Group developers",
	}
	if d := cmp.Diff(want, changeLines(Plan(st, []client.Object{pol}, nil))); d != "" {
		t.Errorf("Plan of an instance becoming gated (-want +got):\n%s", d)
	}
}
