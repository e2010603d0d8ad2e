package cli

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/ownership"
)

var (
	apps     = API{CRD: "applications.argoproj.io", Group: "argoproj.io", Resource: "applications", Scope: ScopeNamespaced}
	clusters = API{CRD: "clusters.argoproj.io", Group: "argoproj.io", Resource: "clusters", Scope: ScopeCluster}
	alice    = rbacv1.Subject{Kind: rbacv1.UserKind, Name: "alice"}
	devs     = rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "developers"}
	robot    = rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "robot", Namespace: "ci"}
)

func rule(group, resource string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs}
}

func roleBinding(ns, name, role string, subjects ...rbacv1.Subject) rbacv1.RoleBinding {
	return rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: role}, Subjects: subjects}
}

func TestCandidates(t *testing.T) {
	oriaBinding := roleBinding("team-a", "rbacpolicy-devs-view-x", "applications.argoproj.io-view", devs)
	oriaBinding.Labels = map[string]string{oriav1alpha1.LabelManaged: oriav1alpha1.ManagedValue}
	oriaBinding.OwnerReferences = []metav1.OwnerReference{ownership.Ref(ownership.KindScopeInstance, "rbacpolicy-devs-view", "uid1")}
	bareInstance := roleBinding("team-b", "si-binding", "applications.argoproj.io-edit", alice)
	bareInstance.Labels = oriaBinding.Labels
	bareInstance.OwnerReferences = []metav1.OwnerReference{ownership.Ref(ownership.KindScopeInstance, "scoped", "uid2")}
	s := &Snapshot{
		ClusterRoles: []rbacv1.ClusterRole{
			clusterRole("view", nil, rule("argoproj.io", "applications", "get", "list", "watch"), rule("", "pods", "get")),
			clusterRole("applications.argoproj.io-view", nil, rule("argoproj.io", "applications", "get", "list", "watch")),
			clusterRole("applications.argoproj.io-edit", nil, rule("argoproj.io", "applications", "create")),
			clusterRole("cluster-admin", nil, rule("*", "*", "*")),
			clusterRole("pods-only", nil, rule("", "pods", "*")),
			clusterRole("status-only", nil, rule("argoproj.io", "applications/status", "get")),
		},
		Roles: []rbacv1.Role{{ObjectMeta: metav1.ObjectMeta{Namespace: "team-c", Name: "apps"}, Rules: []rbacv1.PolicyRule{rule("argoproj.io", "*", "get")}}},
		ClusterRoleBindings: []rbacv1.ClusterRoleBinding{
			{ObjectMeta: metav1.ObjectMeta{Name: "admins"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "cluster-admin"}, Subjects: []rbacv1.Subject{alice}},
			{ObjectMeta: metav1.ObjectMeta{Name: "pods"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "pods-only"}, Subjects: []rbacv1.Subject{devs}},
		},
		RoleBindings: []rbacv1.RoleBinding{
			roleBinding("team-a", "bob-view", "view", rbacv1.Subject{Kind: rbacv1.UserKind, Name: "bob"}),
			oriaBinding,
			bareInstance,
			roleBinding("team-a", "status", "status-only", alice),
			roleBinding("team-b", "robot", "view", robot),
			{ObjectMeta: metav1.ObjectMeta{Namespace: "team-c", Name: "local"}, RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "apps"}, Subjects: []rbacv1.Subject{devs}},
		},
		Instances: []oriav1alpha1.ScopeInstance{
			{ObjectMeta: metav1.ObjectMeta{Name: "rbacpolicy-devs-view", OwnerReferences: []metav1.OwnerReference{
				ownership.Ref(ownership.KindRBACPolicy, "devs-view", "uid3")}}},
		},
	}
	onlyApps := []string{apps.CRD}
	want := []Candidate{
		{Subject: alice, Via: "ClusterRoleBinding admins -> ClusterRole cluster-admin", APIs: onlyApps, Binding: "ClusterRoleBinding admins"},
		{Subject: devs, Namespace: "team-a", Via: "RBACPolicy devs-view", APIs: onlyApps, Binding: "RoleBinding team-a/rbacpolicy-devs-view-x"},
		{Subject: rbacv1.Subject{Kind: rbacv1.UserKind, Name: "bob"}, Namespace: "team-a", Via: "Legacy aggregation: RoleBinding team-a/bob-view -> view",
			APIs: onlyApps, Binding: "RoleBinding team-a/bob-view"},
		{Subject: robot, Namespace: "team-b", Via: "Legacy aggregation: RoleBinding team-b/robot -> view", APIs: onlyApps, Binding: "RoleBinding team-b/robot"},
		{Subject: alice, Namespace: "team-b", Via: "ScopeInstance scoped", APIs: onlyApps, Binding: "RoleBinding team-b/si-binding"},
		{Subject: devs, Namespace: "team-c", Via: "RoleBinding team-c/local -> Role apps", APIs: onlyApps, Binding: "RoleBinding team-c/local"},
	}
	sortCands := func(c []Candidate) []Candidate {
		slices.SortFunc(c, func(a, b Candidate) int {
			return cmpString(a.Namespace+SubjectString(a.Subject), b.Namespace+SubjectString(b.Subject))
		})
		return c
	}
	if d := cmp.Diff(sortCands(want), sortCands(Candidates(s, []API{apps}, ""))); d != "" {
		t.Errorf("Candidates (-want +got):\n%s", d)
	}
	got := Candidates(s, []API{apps}, "team-b")
	if d := cmp.Diff([]Candidate{want[0], want[3], want[4]}, sortCands(got)); d != "" {
		t.Errorf("Candidates in team-b (-want +got):\n%s", d)
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// fakeAuthorizer allows what its grants list: "who|namespace|resource|verb",
// who a user or a group, with namespace "*" for every namespace: an
// identity may what its user or any of its groups may.
type fakeAuthorizer map[string]bool

func (f fakeAuthorizer) Allowed(_ context.Context, id Identity, a authorizationv1.ResourceAttributes) (bool, error) {
	if id.User == "broken" {
		return false, fmt.Errorf("boom")
	}
	for _, who := range append([]string{"User " + id.User}, prefixed("Group ", id.Groups)...) {
		if f[fmt.Sprintf("%s|%s|%s|%s", who, a.Namespace, a.Resource, a.Verb)] || f[fmt.Sprintf("%s|*|%s|%s", who, a.Resource, a.Verb)] {
			return true, nil
		}
	}
	return false, nil
}

func prefixed(prefix string, list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = prefix + s
	}
	return out
}

// grant allows verbs on resource in ns to s: a User or Group as such, a
// ServiceAccount as its user name.
func grant(f fakeAuthorizer, s rbacv1.Subject, ns, resource string, verbs ...string) {
	who := SubjectString(s)
	if s.Kind == rbacv1.ServiceAccountKind {
		who = "User system:serviceaccount:" + s.Namespace + ":" + s.Name
	}
	for _, v := range verbs {
		f[fmt.Sprintf("%s|%s|%s|%s", who, ns, resource, v)] = true
	}
}

func TestConfirm(t *testing.T) {
	az := fakeAuthorizer{}
	all := []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	grant(az, alice, "*", "applications", all...)
	grant(az, alice, "", "clusters", all...)
	grant(az, devs, "team-a", "applications", "get", "list", "watch", "create", "update", "patch", "delete")
	grant(az, robot, "team-b", "applications", "get", "list") // partial
	// bob's binding grants nothing the authorizer confirms: no row.
	cands := []Candidate{
		{Subject: alice, Via: "ClusterRoleBinding admins -> ClusterRole cluster-admin", APIs: []string{apps.CRD, clusters.CRD}},
		{Subject: alice, Namespace: "team-a", Via: "RoleBinding team-a/x -> ClusterRole y", APIs: []string{apps.CRD}},
		{Subject: devs, Namespace: "team-a", Via: "RBACPolicy devs-edit", APIs: []string{apps.CRD}},
		{Subject: rbacv1.Subject{Kind: rbacv1.UserKind, Name: "bob"}, Namespace: "team-a", Via: "Legacy aggregation: RoleBinding team-a/bob-view -> view", APIs: []string{apps.CRD}},
		{Subject: robot, Namespace: "team-b", Via: "Legacy aggregation: RoleBinding team-b/robot -> view", APIs: []string{apps.CRD}},
	}
	got, err := Confirm(context.Background(), az, cands, []API{apps, clusters}, "")
	if err != nil {
		t.Fatal(err)
	}
	adminVia := "ClusterRoleBinding admins -> ClusterRole cluster-admin"
	want := []AccessRow{
		{Subject: "User alice", Namespace: AllNamespaces, API: apps.CRD, Level: LevelAdmin, Verbs: all, Via: []string{adminVia}},
		{Subject: "User alice", Namespace: AllNamespaces, API: clusters.CRD, Level: LevelAdmin, Verbs: all, Via: []string{adminVia}},
		{Subject: "Group developers", Namespace: "team-a", API: apps.CRD, Level: LevelEdit, Verbs: all[:7], Via: []string{"RBACPolicy devs-edit"}},
		{Subject: "User alice", Namespace: "team-a", API: apps.CRD, Level: LevelAdmin, Verbs: all,
			Via: []string{"RoleBinding team-a/x -> ClusterRole y", adminVia}},
		{Subject: "ServiceAccount ci/robot", Namespace: "team-b", API: apps.CRD, Level: LevelPartial, Verbs: []string{"get", "list"},
			Via: []string{"Legacy aggregation: RoleBinding team-b/robot -> view"}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Confirm (-want +got):\n%s", d)
	}

	// With -n, a cluster-wide grant is asked about that namespace.
	got, err = Confirm(context.Background(), az, cands[:1], []API{apps}, "team-z")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]AccessRow{{Subject: "User alice", Namespace: "team-z", API: apps.CRD, Level: LevelAdmin, Verbs: all, Via: []string{adminVia}}}, got); d != "" {
		t.Errorf("Confirm -n team-z (-want +got):\n%s", d)
	}

	if _, err := Confirm(context.Background(), az, []Candidate{{Subject: rbacv1.Subject{Kind: "Broken"}, APIs: []string{apps.CRD}}}, []API{apps}, ""); err == nil {
		t.Error("Confirm: a subject of unknown kind is not an error")
	}
	if _, err := Confirm(context.Background(), az, []Candidate{{Subject: testUser("broken"), APIs: []string{apps.CRD}}}, []API{apps}, ""); err == nil {
		t.Error("Confirm: an authorizer error is not returned")
	}
}

func testUser(name string) rbacv1.Subject { return rbacv1.Subject{Kind: rbacv1.UserKind, Name: name} }

func TestLevel(t *testing.T) {
	for _, tc := range []struct {
		verbs       []string
		level, base string
		describedAs string
	}{
		{[]string{"get", "list", "watch"}, LevelView, "", "view"},
		{[]string{"get", "list", "watch", "create", "update", "patch", "delete"}, LevelEdit, "", "edit"},
		{[]string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}, LevelAdmin, "", "admin"},
		{[]string{"create", "update", "patch", "delete", "deletecollection"}, LevelPartial, "", "partial (create,update,patch,delete,deletecollection)"},
		{[]string{"get", "list", "watch", "create"}, LevelPartial, LevelView, "view+create"},
		// The garbage collector: view and some of edit is not view.
		{[]string{"get", "list", "watch", "update", "patch", "delete"}, LevelPartial, LevelView, "view+update,patch,delete"},
		{[]string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}[:5], LevelPartial, LevelView, "view+create,update"},
		{[]string{"get", "list", "watch", "create", "update", "patch", "delete"}[:7], LevelEdit, "", "edit"},
		{[]string{"get", "list", "watch", "deletecollection"}, LevelPartial, LevelView, "view+deletecollection"},
		{[]string{"get", "list", "watch", "create", "update", "patch", "delete"}[:2], LevelPartial, "", "partial (get,list)"},
	} {
		lvl, base := level(tc.verbs)
		if lvl != tc.level || base != tc.base {
			t.Errorf("level(%v) = %s, %q; want %s, %q", tc.verbs, lvl, base, tc.level, tc.base)
		}
		if got := Describe(AccessRow{Level: lvl, Base: base, Verbs: tc.verbs}); got != tc.describedAs {
			t.Errorf("Describe(%v) = %q, want %q", tc.verbs, got, tc.describedAs)
		}
	}
}
