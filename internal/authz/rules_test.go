package authz

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/rbacrules"
	"github.com/operator-framework/oria/internal/testutil"
)

// cachedRules returns CachedRules over a manager of its own on the package's
// cluster, synced.
func cachedRules(t *testing.T) *CachedRules {
	t.Helper()
	var rc *rbacrules.Cache
	_, stop, err := testutil.StartManager(cluster.Config, func(mgr ctrl.Manager) error {
		var err error
		rc, err = rbacrules.AddToManager(mgr)
		return err
	})
	require.NoError(t, err)
	t.Cleanup(stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, rc.WaitForSync(ctx), "the cache of RBAC objects syncs")
	return NewCachedRules(rc)
}

// TestCachedRules checks the rules read from the cache against the API
// server's own authorizer (SubjectAccessReviews), for a binding oria owns
// (in the manager's cache) and one it does not (in the guard's), created and
// deleted, and that equal holdings share a key.
func TestCachedRules(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	admin, err := testutil.AdminClient(cluster)
	require.NoError(t, err)
	cached := cachedRules(t)

	ns, ns2, role := testutil.UniqueName("cached"), testutil.UniqueName("cached"), testutil.UniqueName("cached-cms")
	user := authenticationv1.UserInfo{Username: testutil.UniqueName("cached-user"), Groups: []string{"system:authenticated"}}
	cms := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user.Username}}
	owned := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "owned", Namespace: ns,
		Labels: map[string]string{oriav1alpha1.LabelManaged: oriav1alpha1.ManagedValue}}, RoleRef: ref, Subjects: subjects}
	for _, o := range []client.Object{
		testutil.Namespace(ns, nil), testutil.Namespace(ns2, nil),
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: cms},
		owned,
	} {
		require.NoError(t, admin.Create(ctx, o))
		t.Cleanup(func() { _ = admin.Delete(ctx, o) })
	}
	holds := func(c *assert.CollectT, want bool) {
		sets, err := cached.RulesIn(ctx, user, []string{ns})
		if !assert.NoError(c, err) {
			return
		}
		covered, _ := rbacvalidation.Covers(sets[ns].Rules, cms)
		assert.Equal(c, want, covered, "rules %v", sets[ns].Rules)
		allowed, err := testutil.Allowed(ctx, admin, testutil.Access{User: user.Username, Groups: user.Groups,
			Verb: "get", Resource: "configmaps", Namespace: ns})
		if assert.NoError(c, err) {
			assert.Equal(c, want, allowed, "the API server agrees")
		}
	}
	assert.EventuallyWithT(t, func(c *assert.CollectT) { holds(c, true) }, 10*time.Second, 20*time.Millisecond,
		"a binding oria owns (the manager's cache) is seen")

	require.NoError(t, admin.Delete(ctx, owned))
	assert.EventuallyWithT(t, func(c *assert.CollectT) { holds(c, false) }, 10*time.Second, 20*time.Millisecond, "its deletion too")

	for _, n := range []string{ns, ns2} {
		other := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "other-" + n, Namespace: n}, RoleRef: ref, Subjects: subjects}
		require.NoError(t, admin.Create(ctx, other))
	}
	assert.EventuallyWithT(t, func(c *assert.CollectT) { holds(c, true) }, 10*time.Second, 20*time.Millisecond,
		"a binding someone else made (the guard's own cache) is seen")
	// The cache sees the binding in ns2 in its own time: wait for it too.
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		sets, err := cached.RulesIn(ctx, user, []string{ns2})
		if assert.NoError(c, err) {
			covered, _ := rbacvalidation.Covers(sets[ns2].Rules, cms)
			assert.True(c, covered, "rules in %s: %v", ns2, sets[ns2].Rules)
		}
	}, 10*time.Second, 20*time.Millisecond, "the binding in the second namespace is seen")

	sets, err := cached.RulesIn(ctx, user, []string{ns, ns2, ""})
	require.NoError(t, err)
	assert.Equal(t, sets[ns].Key, sets[ns2].Key, "the same role bound in two namespaces (under other names): one rule set")
	assert.NotEqual(t, sets[ns].Key, sets[""].Key)
	if covered, _ := rbacvalidation.Covers(sets[""].Rules, cms); covered {
		t.Errorf("a RoleBinding in %s counts cluster-wide: %v", ns, sets[""].Rules)
	}

	// Through the Authorizer: covered grants are settled by the cache,
	// the others by SubjectAccessReviews, which name what is missing.
	authz, err := New(admin, admin, cached)
	require.NoError(t, err)
	got, err := authz.CheckBind(ctx, user, []binding.Grant{{Role: role, Namespace: ns}, {Role: role, Namespace: ns2}}, nil)
	require.NoError(t, err)
	assert.Empty(t, got)
	got, err = authz.CheckBind(ctx, user, []binding.Grant{{Role: role, Namespace: "default"}}, nil)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, []Permission{{Verb: "get", Resource: "configmaps", Namespace: "default"}}, got[0].Missing)
}
