package authz

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/localcluster"
)

// cluster is the package's control plane (etcd and kube-apiserver, RBAC
// on); nil with -short.
var cluster *localcluster.Cluster

func TestMain(m *testing.M) { testutil.RunMain(m, &cluster, localcluster.Options{}) }

// TestAuthorizer checks the Authorizer's answers against the API server's
// real RBAC authorizer.
func TestAuthorizer(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	admin, err := testutil.AdminClient(cluster)
	require.NoError(t, err)
	a, b := testutil.UniqueName("a"), testutil.UniqueName("b")
	podsReader, secretsReader, wide := testutil.UniqueName("pods-reader"), testutil.UniqueName("secrets-reader"), testutil.UniqueName("wide")
	podRules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}
	manyRules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets", "services"}, Verbs: []string{"get", "list", "watch"}}}
	user := authenticationv1.UserInfo{Username: testutil.UniqueName("user"), Groups: []string{"system:authenticated"}}
	clusterUser := authenticationv1.UserInfo{Username: testutil.UniqueName("cluster-user"), Groups: []string{"system:authenticated"}}
	subject := func(u authenticationv1.UserInfo) []rbacv1.Subject {
		return []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: u.Username}}
	}
	ref := func(kind, name string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name}
	}
	for _, o := range []client.Object{
		testutil.Namespace(a, nil), testutil.Namespace(b, nil),
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: podsReader}, Rules: append(podRules,
			rbacv1.PolicyRule{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}})},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: secretsReader}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: wide}, Rules: manyRules},
		// user reads pods in a, and may bind secretsReader (by name) in b.
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "pods", Namespace: a}, RoleRef: ref("ClusterRole", podsReader), Subjects: subject(user)},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "bind-secrets", Namespace: b}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, Verbs: []string{"bind"}, ResourceNames: []string{secretsReader}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bind-secrets", Namespace: b}, RoleRef: ref("Role", "bind-secrets"), Subjects: subject(user)},
		// clusterUser reads pods everywhere, and /metrics, and may bind
		// secretsReader everywhere.
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: clusterUser.Username}, RoleRef: ref("ClusterRole", podsReader), Subjects: subject(clusterUser)},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "bind-" + clusterUser.Username}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, Verbs: []string{"bind"}, ResourceNames: []string{secretsReader}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bind-" + clusterUser.Username}, RoleRef: ref("ClusterRole", "bind-"+clusterUser.Username), Subjects: subject(clusterUser)},
	} {
		require.NoError(t, admin.Create(ctx, o))
		t.Cleanup(func() { _ = admin.Delete(ctx, o) })
	}
	authz, err := New(admin, admin, NoRules{})
	require.NoError(t, err)
	// The same answers from the user's rules in each namespace, read from
	// the cluster's RBAC objects held in memory, as from one review per
	// permission.
	withCache, err := New(admin, admin, cachedRules(t))
	require.NoError(t, err)
	u, err := withCache.rulesIn(ctx, user, []string{a, b, ""})
	require.NoError(t, err, "the rules are read, not asked for one by one")
	if covered, _ := rbacvalidation.Covers(u.sets[""].Rules, podRules); covered {
		t.Fatalf("%s reads pods only in %s, yet its cluster-wide rules cover them: %v", user.Username, a, u.sets[""].Rules)
	}
	if covered, _ := rbacvalidation.Covers(u.sets[a].Rules, podRules); !covered {
		t.Fatalf("rules of %s in %s do not cover its pods: %v", user.Username, a, u.sets[a].Rules)
	}

	missing := func(ns string, p ...Permission) []Permission {
		for i := range p {
			p[i].Namespace = ns
		}
		return p
	}
	getPods, listPods := Permission{Verb: "get", Resource: "pods"}, Permission{Verb: "list", Resource: "pods"}
	for _, tc := range []struct {
		name   string
		user   authenticationv1.UserInfo
		grants []binding.Grant
		inline map[string][]rbacv1.PolicyRule
		want   []Denial
	}{
		{name: "holds the role's permissions in the namespace", user: user, grants: []binding.Grant{{Role: podsReader, Namespace: a}}},
		{name: "not in another namespace", user: user, grants: []binding.Grant{{Role: podsReader, Namespace: b}},
			want: []Denial{{Verb: "bind", Grant: binding.Grant{Role: podsReader, Namespace: b}, Missing: missing(b, getPods, listPods)}}},
		{name: "cluster-wide needs them cluster-wide, non-resource URLs too", user: user, grants: []binding.Grant{{Role: podsReader}},
			want: []Denial{{Verb: "bind", Grant: binding.Grant{Role: podsReader}, Missing: []Permission{getPods, listPods, {Verb: "get", NonResourceURL: "/metrics"}}}}},
		{name: "held cluster-wide", user: clusterUser, grants: []binding.Grant{{Role: podsReader}, {Role: podsReader, Namespace: b}}},
		{name: "bind cluster-wide answers for every namespace", user: clusterUser,
			grants: []binding.Grant{{Role: secretsReader, Namespace: a}, {Role: secretsReader, Namespace: b}, {Role: secretsReader}}},
		{name: "bind by name where granted", user: user, grants: []binding.Grant{{Role: secretsReader, Namespace: b}}},
		{name: "bind by name only there", user: user, grants: []binding.Grant{{Role: secretsReader, Namespace: a}},
			want: []Denial{{Verb: "bind", Grant: binding.Grant{Role: secretsReader, Namespace: a}, Missing: missing(a, Permission{Verb: "get", Resource: "secrets"})}}},
		{name: "an absent role needs bind", user: user, grants: []binding.Grant{{Role: testutil.UniqueName("absent"), Namespace: a}},
			want: []Denial{{Verb: "bind", Absent: true}}},
		{name: "an inline role is judged by its rules", user: user, grants: []binding.Grant{{Role: "inline-x", Namespace: a}},
			inline: map[string][]rbacv1.PolicyRule{"inline-x": podRules}},
		{name: "the search for missing permissions stops at MaxMissing", user: user, grants: []binding.Grant{{Role: wide, Namespace: a}},
			want: []Denial{{Verb: "bind", Grant: binding.Grant{Role: wide, Namespace: a}, More: true, Missing: missing(a,
				Permission{Verb: "get", Resource: "configmaps"}, Permission{Verb: "list", Resource: "configmaps"}, Permission{Verb: "watch", Resource: "configmaps"},
				Permission{Verb: "get", Resource: "secrets"}, Permission{Verb: "list", Resource: "secrets"})}}},
	} {
		for variant, authz := range map[string]*Authorizer{"reviews": authz, "cached rules": withCache} {
			t.Run(variant+": "+tc.name, func(t *testing.T) {
				got, err := authz.CheckBind(ctx, tc.user, tc.grants, tc.inline)
				require.NoError(t, err)
				if len(tc.want) == 1 && tc.want[0].Absent {
					tc.want[0].Grant = tc.grants[0]
				}
				if len(tc.want) > 0 && tc.want[0].More {
					// Which five of the nine are found first depends on timing;
					// that there are five and that the search stopped does not.
					require.Len(t, got, 1)
					require.Len(t, got[0].Missing, DefaultMaxMissing)
					require.True(t, got[0].More)
					return
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("CheckBind (-want +got):\n%s", diff)
				}
			})
		}
	}

	t.Run("escalate: a role's rules must be held cluster-wide", func(t *testing.T) {
		got, err := authz.CheckEscalate(ctx, user, map[string][]rbacv1.PolicyRule{"mine": podRules})
		require.NoError(t, err)
		want := []Denial{{Verb: "escalate", Grant: binding.Grant{Role: "mine"}, Missing: []Permission{getPods, listPods}}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("CheckEscalate (-want +got):\n%s", diff)
		}
		got, err = authz.CheckEscalate(ctx, clusterUser, map[string][]rbacv1.PolicyRule{"mine": podRules})
		require.NoError(t, err)
		require.Empty(t, got)
	})
	t.Run("bind on every ClusterRole", func(t *testing.T) {
		got, err := authz.CheckBindEveryRole(ctx, user, []binding.Grant{{Namespace: a}, {Namespace: b}})
		require.NoError(t, err)
		if diff := cmp.Diff([]binding.Grant{{Namespace: a}, {Namespace: b}}, got); diff != "" {
			t.Errorf("CheckBindEveryRole (-want +got):\n%s", diff)
		}
	})
	t.Run("unrestricted: cluster admins only", func(t *testing.T) {
		for u, want := range map[string]bool{user.Username: false, clusterUser.Username: false} {
			ok, err := authz.Unrestricted(ctx, authenticationv1.UserInfo{Username: u})
			require.NoError(t, err)
			require.Equal(t, want, ok, u)
		}
		ok, err := authz.Unrestricted(ctx, authenticationv1.UserInfo{Username: "root", Groups: []string{"system:masters"}})
		require.NoError(t, err)
		require.True(t, ok)
	})
}
