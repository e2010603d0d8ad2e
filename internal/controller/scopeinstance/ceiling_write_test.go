package scopeinstance

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
)

func ceilingRB(ns, role, ceiling string) *rbacv1.RoleBinding {
	b := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b-" + role, UID: types.UID(ns + "/" + role + "/" + ceiling)},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}}
	if ceiling != "" {
		b.Annotations = map[string]string{oriav1alpha1.AnnotationCeilingRules: ceiling}
	}
	return b
}

func keys(bs []*rbacv1.RoleBinding) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Namespace+"/"+b.Name+"@"+binding.Ceiling(b))
	}
	return out
}

// The ServiceAccount is asked about a role ahead of what it grants for
// every binding that does not record the new rules yet, existing or not.
func TestAsk(t *testing.T) {
	c := &ceiling{values: map[string]string{"inline": "new", "ref": "h"},
		ahead: map[string][]rbacv1.PolicyRule{"inline": {{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}}
	want := binding.Set{RoleBindings: []*rbacv1.RoleBinding{ceilingRB("a", "inline", "new"), ceilingRB("b", "inline", "new"), ceilingRB("c", "inline", "new"),
		ceilingRB("a", "ref", "h")}}
	have := binding.Set{RoleBindings: []*rbacv1.RoleBinding{
		ceilingRB("a", "inline", "new"), // allowed already
		ceilingRB("b", "inline", "old"), // records the old rules
		ceilingRB("a", "ref", "old"),    // not ahead: the API server checks it when it is written
	}}
	got := ask(c, want, have.ByKey())
	if d := cmp.Diff([]binding.Grant{{Role: "inline", Namespace: "b"}, {Role: "inline", Namespace: "c"}}, got); d != "" {
		t.Errorf("ask (-want +got):\n%s", d)
	}
	if got := ask(&ceiling{values: c.values}, want, have.ByKey()); got != nil {
		t.Errorf("ask with nothing ahead = %v, want nothing", got)
	}
}

// A refused grant is not written, reported Forbidden, and its existing
// binding deleted; the others are written.
func TestSplit(t *testing.T) {
	want := binding.Set{RoleBindings: []*rbacv1.RoleBinding{ceilingRB("a", "inline", "new"), ceilingRB("b", "inline", "new"), ceilingRB("c", "inline", "new")}}
	existing := binding.Set{RoleBindings: []*rbacv1.RoleBinding{ceilingRB("a", "inline", "old"), ceilingRB("b", "inline", "old")}}.ByKey()
	denied := map[binding.Grant]string{{Role: "inline", Namespace: "b"}: "no secrets in b", {Role: "inline", Namespace: "c"}: "no secrets in c"}
	keep, refused, drop := split(want, existing, denied)
	if d := cmp.Diff([]string{"a/b-inline@new"}, keys(keep.RoleBindings)); d != "" {
		t.Errorf("kept (-want +got):\n%s", d)
	}
	var gotRefused []string
	for _, o := range refused {
		if o.Action != engine.Forbidden {
			t.Errorf("refused %s/%s: action %v, want Forbidden", o.Namespace, o.Name, o.Action)
		}
		gotRefused = append(gotRefused, o.Namespace+"/"+o.Name+": "+o.Err.Error())
	}
	if d := cmp.Diff([]string{"b/b-inline: no secrets in b", "c/b-inline: no secrets in c"}, gotRefused); d != "" {
		t.Errorf("refused (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"b/b-inline@old"}, keys(drop.RoleBindings)); d != "" {
		t.Errorf("dropped (-want +got):\n%s", d)
	}
}

// A rewrite the ServiceAccount was refused removes the binding only when
// its record differs from the intended one: then the role changed since
// the ServiceAccount last allowed it.
func TestRefusedRewrites(t *testing.T) {
	want := binding.Set{RoleBindings: []*rbacv1.RoleBinding{ceilingRB("a", "ref", "h2"), ceilingRB("b", "ref", "h2"), ceilingRB("c", "ref", "h2"), ceilingRB("d", "ref", "h2")}}
	existing := binding.Set{RoleBindings: []*rbacv1.RoleBinding{
		ceilingRB("a", "ref", "h1"), // role changed, rewrite refused: goes
		ceilingRB("b", "ref", "h2"), // allowed; refused for another reason (subjects): stays
		ceilingRB("c", "ref", "h1"), // role changed, rewrite allowed
	}}
	forbidden := errors.New("forbidden")
	outcomes := []engine.Outcome{
		{Namespace: "a", Name: "b-ref", Action: engine.Forbidden, Err: forbidden},
		{Namespace: "b", Name: "b-ref", Action: engine.Forbidden, Err: forbidden},
		{Namespace: "c", Name: "b-ref", Action: engine.Updated},
		{Namespace: "d", Name: "b-ref", Action: engine.Forbidden, Err: forbidden}, // a create: nothing to delete
	}
	if d := cmp.Diff([]string{"a/b-ref@h1"}, keys(refusedRewrites(outcomes, want, existing).RoleBindings)); d != "" {
		t.Errorf("refusedRewrites (-want +got):\n%s", d)
	}
}

func TestCeilingAnnotate(t *testing.T) {
	c := &ceiling{values: map[string]string{"inline": "new", "pending": "p-new"}}
	p := &plan{want: binding.Set{RoleBindings: []*rbacv1.RoleBinding{ceilingRB("a", "inline", "")}}, existing: binding.Set{RoleBindings: []*rbacv1.RoleBinding{ceilingRB("a", "inline", "old"), ceilingRB("a", "pending", "p-old"), ceilingRB("b", "pending", "p-new"), ceilingRB("z", "gone", "")}}, revoke: binding.Set{RoleBindings: []*rbacv1.RoleBinding{ceilingRB("z", "gone", "")}}}
	c.annotate(p)
	if d := cmp.Diff([]string{"a/b-inline@new"}, keys(p.want.RoleBindings)); d != "" {
		t.Errorf("intended bindings (-want +got):\n%s", d)
	}
	// The kept binding of the pending role that records old rules goes;
	// the stale one is not listed twice.
	if d := cmp.Diff([]string{"z/b-gone@", "a/b-pending@p-old"}, keys(p.revoke.RoleBindings)); d != "" {
		t.Errorf("stale bindings (-want +got):\n%s", d)
	}
}

// A binding removed because the ServiceAccount no longer allows what
// its role grants is Forbidden, says so, and its namespace is not bound.
func TestComputeStatusRevoked(t *testing.T) {
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "si", Generation: 2},
		Spec: oriav1alpha1.ScopeInstanceSpec{ServiceAccount: &oriav1alpha1.ServiceAccountReference{Namespace: "sa-ns", Name: "sa-x"}}}
	p := &plan{template: &oriav1alpha1.ScopeTemplate{}, roles: []string{"inline"}, targets: binding.Targets{Namespaces: []string{"a", "b"}}}
	refused := []engine.Outcome{{Namespace: "b", Name: "si-inline", Action: engine.Forbidden, Err: errors.New(`user "x" may not bind ClusterRole "inline" (missing: get secrets)`)}}
	res := result{summary: engine.Summarize(refused, []engine.Outcome{{Namespace: "b", Name: "si-inline", Action: engine.Deleted}}), revoked: 1}
	st := computeStatus(si, p, withBound(si.Name, p, res), nil)
	want := metav1.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionFalse, Reason: oriav1alpha1.ReasonForbidden, ObservedGeneration: 2,
		Message: `ServiceAccount sa-ns/sa-x (spec.serviceAccount) may not grant 1 binding(s), so they were not written and 1 of them, written before, were removed ` +
			`(what their ClusterRole grants changed): user "x" may not bind ClusterRole "inline" (missing: get secrets) (1 ClusterRole(s) bound in 1 namespace(s); oria tries again every 30s)`}
	got := st.Conditions[0]
	got.LastTransitionTime = metav1.Time{}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Ready (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"a"}, st.BoundNamespaces); d != "" {
		t.Errorf("bound namespaces (-want +got):\n%s", d)
	}
}

// The Events count each kind of binding by its name, the namespaces of a
// namespaced kind named, one part per kind that changed.
func TestDescribeChanges(t *testing.T) {
	outcomes := engine.SetOutcome{
		{Kind: "RoleBinding", Namespaced: true, Outcomes: []engine.Outcome{
			{Namespace: "b", Name: "x", Action: engine.Created}, {Namespace: "a", Name: "x", Action: engine.Created},
			{Namespace: "a", Name: "y", Action: engine.Created}, {Namespace: "c", Name: "x", Action: engine.Unchanged}}},
		{Kind: "ClusterRoleBinding", Outcomes: []engine.Outcome{{Name: "z", Action: engine.Created}}},
	}
	if got, want := describeChanges(engine.Created, outcomes), "3 RoleBinding(s) in 2 namespace(s): a, b and 1 ClusterRoleBinding(s)"; got != want {
		t.Errorf("describeChanges = %q, want %q", got, want)
	}
	if got := describeChanges(engine.Deleted, outcomes); got != "" {
		t.Errorf("nothing deleted: %q", got)
	}
}
