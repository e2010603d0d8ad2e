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
	oriaBinding.Labels = map[string]string{oriav1alpha1.LabelManagedBy: oriav1alpha1.ManagedByValue}
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
	want := []Candidate{
		{Subject: alice, Via: "ClusterRoleBinding admins -> ClusterRole cluster-admin"},
		{Subject: devs, Namespace: "team-a", Via: "RBACPolicy devs-view"},
		{Subject: rbacv1.Subject{Kind: rbacv1.UserKind, Name: "bob"}, Namespace: "team-a", Via: "Legacy aggregation: RoleBinding team-a/bob-view -> view"},
		{Subject: robot, Namespace: "team-b", Via: "Legacy aggregation: RoleBinding team-b/robot -> view"},
		{Subject: alice, Namespace: "team-b", Via: "ScopeInstance scoped"},
		{Subject: devs, Namespace: "team-c", Via: "RoleBinding team-c/local -> Role apps"},
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

// fakeAuthorizer allows what its grants list: "subject|namespace|resource|verb",
// with namespace "*" for every namespace.
type fakeAuthorizer map[string]bool

func (f fakeAuthorizer) Allowed(_ context.Context, s rbacv1.Subject, a authorizationv1.ResourceAttributes) (bool, error) {
	if s.Kind == "Broken" {
		return false, fmt.Errorf("boom")
	}
	return f[fmt.Sprintf("%s|%s|%s|%s", SubjectString(s), a.Namespace, a.Resource, a.Verb)] ||
		f[fmt.Sprintf("%s|*|%s|%s", SubjectString(s), a.Resource, a.Verb)], nil
}

func grant(f fakeAuthorizer, s rbacv1.Subject, ns, resource string, verbs ...string) {
	for _, v := range verbs {
		f[fmt.Sprintf("%s|%s|%s|%s", SubjectString(s), ns, resource, v)] = true
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
		{Subject: alice, Via: "ClusterRoleBinding admins -> ClusterRole cluster-admin"},
		{Subject: alice, Namespace: "team-a", Via: "RoleBinding team-a/x -> ClusterRole y"},
		{Subject: devs, Namespace: "team-a", Via: "RBACPolicy devs-edit"},
		{Subject: rbacv1.Subject{Kind: rbacv1.UserKind, Name: "bob"}, Namespace: "team-a", Via: "Legacy aggregation: RoleBinding team-a/bob-view -> view"},
		{Subject: robot, Namespace: "team-b", Via: "Legacy aggregation: RoleBinding team-b/robot -> view"},
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

	if _, err := Confirm(context.Background(), az, []Candidate{{Subject: rbacv1.Subject{Kind: "Broken"}}}, []API{apps}, ""); err == nil {
		t.Error("Confirm: an authorizer error is not returned")
	}
}

func TestLevel(t *testing.T) {
	for _, tc := range []struct {
		verbs []string
		want  string
	}{
		{[]string{"get", "list", "watch"}, LevelView},
		{[]string{"get", "list", "watch", "create", "update", "patch", "delete"}, LevelEdit},
		{[]string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}, LevelAdmin},
		{[]string{"create", "update", "patch", "delete", "deletecollection"}, LevelPartial},
		{[]string{"get", "list", "watch", "create"}, LevelView},
	} {
		if got := level(tc.verbs); got != tc.want {
			t.Errorf("level(%v) = %s, want %s", tc.verbs, got, tc.want)
		}
	}
}
