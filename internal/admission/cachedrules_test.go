package admission

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
	"github.com/operator-framework/oria/internal/testutil"
)

// cachedRules returns CachedRules over a manager of its own on the package's
// cluster, synced, with a fallback that fails the test if asked.
func cachedRules(t *testing.T) *CachedRules {
	t.Helper()
	var rules *CachedRules
	_, stop, err := testutil.StartManager(cluster.Config, func(mgr ctrl.Manager) error {
		var err error
		rules, err = NewCachedRules(mgr, failingRules{t})
		return err
	})
	require.NoError(t, err)
	t.Cleanup(stop)
	require.Eventually(t, rules.Cache.Synced, 30*time.Second, 20*time.Millisecond, "the cache of RBAC objects syncs")
	return rules
}

// failingRules is a RuleSource that must not be asked.
type failingRules struct{ t *testing.T }

func (f failingRules) Rules(context.Context, authenticationv1.UserInfo, string) ([]rbacv1.PolicyRule, bool, error) {
	f.t.Error("the fallback was asked although the cache had synced")
	return nil, false, nil
}

// TestCachedRules checks the rules read from the cache against the API
// server's own answer (SelfSubjectRulesReview), for bindings oria owns (in
// the manager's cache) and others (in the guard's), and that a binding
// created or deleted is seen at once.
func TestCachedRules(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	admin, err := testutil.AdminClient(cluster)
	require.NoError(t, err)
	cached := cachedRules(t)
	reviewer, err := NewRulesReviewer(cluster.Config)
	require.NoError(t, err)

	ns, role := testutil.UniqueName("cached"), testutil.UniqueName("cached-cms")
	user := authenticationv1.UserInfo{Username: testutil.UniqueName("cached-user"), Groups: []string{"system:authenticated"}}
	cms := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user.Username}}
	owned := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "owned", Namespace: ns,
		Labels: map[string]string{oriav1alpha1.LabelManagedBy: oriav1alpha1.ManagedByValue}}, RoleRef: ref, Subjects: subjects}
	for _, o := range []client.Object{
		testutil.Namespace(ns, nil),
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: cms},
		owned,
	} {
		require.NoError(t, admin.Create(ctx, o))
		t.Cleanup(func() { _ = admin.Delete(ctx, o) })
	}
	holds := func(c *assert.CollectT, want bool) {
		rules, complete, err := cached.Rules(ctx, user, ns)
		if !assert.NoError(c, err) {
			return
		}
		assert.False(c, complete, "cached rules are RBAC's only: never complete")
		covered, _ := rbacvalidation.Covers(rules, cms)
		assert.Equal(c, want, covered, "rules %v", rules)
		server, _, err := reviewer.Rules(ctx, user, ns)
		if assert.NoError(c, err) {
			covered, _ = rbacvalidation.Covers(server, cms)
			assert.Equal(c, want, covered, "the API server agrees: %v", server)
		}
	}
	assert.EventuallyWithT(t, func(c *assert.CollectT) { holds(c, true) }, 10*time.Second, 20*time.Millisecond,
		"a binding oria owns (the manager's cache) is seen")

	require.NoError(t, admin.Delete(ctx, owned))
	assert.EventuallyWithT(t, func(c *assert.CollectT) { holds(c, false) }, 10*time.Second, 20*time.Millisecond, "its deletion too")

	other := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns}, RoleRef: ref, Subjects: subjects}
	require.NoError(t, admin.Create(ctx, other))
	assert.EventuallyWithT(t, func(c *assert.CollectT) { holds(c, true) }, 10*time.Second, 20*time.Millisecond,
		"a binding someone else made (the guard's own cache) is seen")

	rules, _, err := cached.Rules(ctx, user, "")
	require.NoError(t, err)
	if covered, _ := rbacvalidation.Covers(rules, cms); covered {
		t.Errorf("a RoleBinding in %s counts cluster-wide: %v", ns, rules)
	}

	// Through the Authorizer: covered grants are settled by the cache,
	// the others confirmed by SubjectAccessReviews (the rules are never
	// complete), with the same answers.
	authz := &Authorizer{Client: admin, Reader: admin, Rules: cached}
	got, err := authz.CheckBind(ctx, user, []binding.Grant{{Role: role, Namespace: ns}}, nil)
	require.NoError(t, err)
	assert.Empty(t, got)
	got, err = authz.CheckBind(ctx, user, []binding.Grant{{Role: role, Namespace: "default"}}, nil)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, []Permission{{Verb: "get", Resource: "configmaps", Namespace: "default"}}, got[0].Missing)
}
