package scopeinstance_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/controller/scopeinstance"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestDriftIsRepaired: deleted and edited bindings are restored.
func TestDriftIsRepaired(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns := namespace(t, "drift", nil)
	other := namespace(t, "drift", nil)
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User("alice"))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{ns, other}, nil)
	create(t, si)
	eventuallyBoundIn(t, si.Name, "view", ns, other)
	name := binding.BindingName(si.Name, "view")

	// Deleted: recreated.
	orig := get(t, name, ns, &rbacv1.RoleBinding{})
	require.NoError(t, k8sClient.Delete(ctx, orig))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		rb := &rbacv1.RoleBinding{}
		if assert.NoError(c, k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, rb)) {
			assert.NotEqual(c, orig.UID, rb.UID)
		}
	}, testutil.Timeout, testutil.Interval)

	// Subjects edited: restored.
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	update(t, rb, func() {
		rb.Subjects = append(rb.Subjects, testutil.User("mallory"))
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, []rbacv1.Subject{testutil.User("alice")}, get(c, name, ns, &rbacv1.RoleBinding{}).Subjects)
	}, testutil.Timeout, testutil.Interval)

	// oria's labels removed (the object leaves oria's cache): restored,
	// since the ownerReference still says it is oria's.
	rb = &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: other}}
	update(t, rb, func() {
		rb.Labels = map[string]string{"kept": "yes"}
		rb.Subjects = []rbacv1.Subject{testutil.User("mallory")}
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := get(c, name, other, &rbacv1.RoleBinding{})
		assert.Equal(c, si.Name, got.Labels[oriav1alpha1.LabelScopeInstance])
		assert.Equal(c, "yes", got.Labels["kept"], "labels oria does not own are kept")
		assert.Equal(c, []rbacv1.Subject{testutil.User("alice")}, got.Subjects)
	}, testutil.Timeout, testutil.Interval)
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
}

// TestInstanceDeleteRemovesBindings: deleting the instance removes its
// bindings (no garbage collector runs here: oria does it).
func TestInstanceDeleteRemovesBindings(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns := namespace(t, "del", nil)
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User("alice"))
	create(t, tmpl)
	nsInst := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{ns}, nil)
	cwInst := newInstance(testutil.UniqueName("si"), tmpl.Name, nil, nil)
	create(t, nsInst)
	create(t, cwInst)
	eventuallyBoundIn(t, nsInst.Name, "view", ns)
	eventuallyReady(t, cwInst.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)

	require.NoError(t, k8sClient.Delete(ctx, nsInst))
	require.NoError(t, k8sClient.Delete(ctx, cwInst))
	eventuallyBoundIn(t, nsInst.Name, "view", []string{}...)
	testutil.EventuallyGone(t, k8sClient, clusterRoleBinding(binding.BindingName(cwInst.Name, "view")))
}

// TestUnchangedWorldWritesNothing: once converged, a reconcile makes zero
// writes, status included.
func TestUnchangedWorldWritesNothing(t *testing.T) {
	testutil.NeedCluster(t)
	team := testutil.UniqueName("team")
	var nss []string
	for range 5 {
		nss = append(nss, namespace(t, "quiet", map[string]string{"team": team}))
	}
	missing := testutil.UniqueName("absent")
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{
		{Name: "view"}, {GenerateName: "pods-", Rules: podRules},
	}, testutil.ServiceAccount("bot", ""), testutil.User("alice"))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, append([]string{missing}, nss...), nil)
	cw := newInstance(testutil.UniqueName("si"), tmpl.Name, nil, nil) // InvalidSubject: a terminal state is quiet too
	create(t, si)
	create(t, cw)
	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonNamespaceNotFound)
	eventuallyReady(t, cw.Name, metav1.ConditionFalse, oriav1alpha1.ReasonInvalidSubject)
	inline := binding.RoleName(tmpl.Name, oriav1alpha1.ClusterRoleTemplate{GenerateName: "pods-", Rules: podRules})
	eventuallyBoundIn(t, si.Name, inline, nss...)

	r, counter := countingReconciler(t)
	for _, name := range []string{si.Name, cw.Name} {
		// The cache may lag the API server by a moment: wait until a
		// reconcile is quiet, then require the next one to be quiet too.
		req := reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}
		testutil.EventuallyQuiet(t, r, counter, req)
		testutil.Quiet(t, r, counter, req, 1)
	}
}

// countingReconciler returns a Reconciler on the package manager's cache
// whose writes as oria are counted (a ceiling's ServiceAccount writes
// through its own client).
func countingReconciler(t *testing.T) (*scopeinstance.Reconciler, *testutil.WriteCounter) {
	t.Helper()
	c, counter := testutil.CountingClient(mgr.GetClient())
	d := deps
	d.Client, d.Recorder = c, &events.FakeRecorder{}
	r, err := scopeinstance.New(d, scopeinstance.Options{})
	require.NoError(t, err)
	return r, counter
}
