package cli

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCanOptionsIdentity(t *testing.T) {
	for _, tc := range []struct {
		opts CanOptions
		want Identity
		err  bool
	}{
		{CanOptions{User: "alice"}, Identity{User: "alice", Groups: []string{Authenticated}}, false},
		{CanOptions{User: "alice", Groups: []string{"devs", "devs"}}, Identity{User: "alice", Groups: []string{"devs", Authenticated}}, false},
		{CanOptions{Groups: []string{"devs"}}, Identity{Groups: []string{"devs"}}, false},
		{CanOptions{ServiceAccount: "ci/robot"}, Identity{User: "system:serviceaccount:ci:robot",
			Groups: []string{Authenticated, "system:serviceaccounts", "system:serviceaccounts:ci"}}, false},
		{CanOptions{User: "system:serviceaccount:ci:robot"}, Identity{User: "system:serviceaccount:ci:robot",
			Groups: []string{Authenticated, "system:serviceaccounts", "system:serviceaccounts:ci"}}, false},
		{CanOptions{}, Identity{}, true},
		{CanOptions{ServiceAccount: "robot"}, Identity{}, true},
		{CanOptions{ServiceAccount: "ci/robot", User: "alice"}, Identity{}, true},
	} {
		got, err := tc.opts.Identity()
		if (err != nil) != tc.err {
			t.Errorf("%+v: error %v", tc.opts, err)
			continue
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%+v (-want +got):\n%s", tc.opts, d)
		}
	}
	id := UserIdentity("system:serviceaccount:ci:robot", []string{"developers"})
	for s, want := range map[rbacv1.Subject]bool{
		robot: true, testUser("system:serviceaccount:ci:robot"): true, devs: true, alice: false,
		{Kind: rbacv1.GroupKind, Name: "system:serviceaccounts:ci"}:          true,
		{Kind: rbacv1.ServiceAccountKind, Namespace: "other", Name: "robot"}: false,
	} {
		if got := id.Names(s); got != want {
			t.Errorf("Names(%v) = %v, want %v", s, got, want)
		}
	}
}

func TestConfirmFor(t *testing.T) {
	az := fakeAuthorizer{}
	view := []string{"get", "list", "watch"}
	edit := append(view, "create", "update", "patch", "delete")
	grant(az, alice, "team-a", "applications", view...)
	grant(az, devs, "team-a", "applications", edit...)
	grant(az, devs, "", "clusters", view...)
	grant(az, devs, "team-b", "databases", view...)
	dbs := API{CRD: "databases.db.io", Group: "db.io", Resource: "databases", Scope: ScopeNamespaced}
	owner := map[string]string{apps.CRD: "argocd", clusters.CRD: "argocd", dbs.CRD: "db"}
	cands := []Candidate{
		{Subject: alice, Namespace: "team-a", Via: "Legacy aggregation: RoleBinding team-a/alice -> view", Binding: "RoleBinding team-a/alice", APIs: []string{apps.CRD}},
		{Subject: devs, Namespace: "team-a", Via: "RBACPolicy devs-edit", Binding: "RoleBinding team-a/x", APIs: []string{apps.CRD}},
		{Subject: devs, Via: "ClusterRoleBinding devs-clusters -> ClusterRole c", Binding: "ClusterRoleBinding devs-clusters", APIs: []string{clusters.CRD}},
		{Subject: devs, Namespace: "team-b", Via: "RBACPolicy db-view", Binding: "RoleBinding team-b/y", APIs: []string{dbs.CRD}},
		{Subject: testUser("bob"), Namespace: "team-a", Via: "RBACPolicy bob", Binding: "RoleBinding team-a/bob", APIs: []string{apps.CRD}},
	}
	id := UserIdentity("alice", []string{"developers"})
	got, err := ConfirmFor(context.Background(), az, id, cands, []API{apps, clusters, dbs}, owner, "")
	if err != nil {
		t.Fatal(err)
	}
	who := "User alice, Group developers, Group system:authenticated"
	want := []AccessRow{
		{Subject: who, Namespace: AllNamespaces, API: clusters.CRD, Extension: "argocd", Level: LevelView, Verbs: view,
			Via: []string{"ClusterRoleBinding devs-clusters -> ClusterRole c (Group developers)"}, Bindings: []string{"ClusterRoleBinding devs-clusters"}},
		{Subject: who, Namespace: "team-a", API: apps.CRD, Extension: "argocd", Level: LevelEdit, Verbs: edit,
			Via:      []string{"Legacy aggregation: RoleBinding team-a/alice -> view (User alice)", "RBACPolicy devs-edit (Group developers)"},
			Bindings: []string{"RoleBinding team-a/alice", "RoleBinding team-a/x"}},
		{Subject: who, Namespace: "team-b", API: dbs.CRD, Extension: "db", Level: LevelView, Verbs: view,
			Via: []string{"RBACPolicy db-view (Group developers)"}, Bindings: []string{"RoleBinding team-b/y"}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ConfirmFor (-want +got):\n%s", d)
	}
}

func TestControllers(t *testing.T) {
	defaults := map[string]string{LabelBootstrapping: "rbac-defaults"}
	gc := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "kube-system", Name: "generic-garbage-collector"}
	kcm := testUser("system:kube-controller-manager")
	masters := rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "system:masters"}
	s := &Snapshot{
		ClusterRoles: []rbacv1.ClusterRole{clusterRole("all", nil, rule("*", "*", "get", "update"))},
		ClusterRoleBindings: []rbacv1.ClusterRoleBinding{
			{ObjectMeta: metav1.ObjectMeta{Name: "system:controller:gc", Labels: defaults}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "all"},
				Subjects: []rbacv1.Subject{gc, kcm, masters}},
			{ObjectMeta: metav1.ObjectMeta{Name: "mine"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "all"}, Subjects: []rbacv1.Subject{kcm}},
		},
	}
	var got []string
	for _, c := range WithoutControllers(Candidates(s, []API{apps}, "")) {
		got = append(got, SubjectString(c.Subject)+" "+c.Binding)
	}
	want := []string{"Group system:masters ClusterRoleBinding system:controller:gc", "User system:kube-controller-manager ClusterRoleBinding mine"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("WithoutControllers (-want +got):\n%s", d)
	}
}

func TestCompletionArgs(t *testing.T) {
	if got, ok := CompletionArgs("kubectl_complete-oria", []string{"access", ""}); !ok || !cmp.Equal(got, []string{"__complete", "access", ""}) {
		t.Errorf("CompletionArgs = %v, %v", got, ok)
	}
	if _, ok := CompletionArgs("kubectl-oria", []string{"access"}); ok {
		t.Error("CompletionArgs as kubectl-oria: completing")
	}
}
