package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/publish"
	"github.com/operator-framework/oria/internal/testutil"
)

const (
	gadgetSystem = "gadget-system"
	gadgetScope  = "gadget-operator-scope"
	gadgetLabel  = "gadgets.example.com/watched"
)

// fastClient is a cluster-admin client without client-side throttling, to
// label many namespaces at once.
func fastClient(t *testing.T) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(cluster.Config)
	cfg.QPS, cfg.Burst = 1000, 2000
	c, err := client.New(cfg, client.Options{Scheme: k8sClient.Scheme()})
	require.NoError(t, err)
	return c
}

// replicaSets returns the number of ReplicaSets of the gadget operator's
// Deployment: one per rollout (a restart with a list seen before reuses
// its ReplicaSet; the lists here are all new).
func replicaSets(t require.TestingT) int {
	var list appsv1.ReplicaSetList
	require.NoError(t, k8sClient.List(context.Background(), &list, client.InNamespace(gadgetSystem),
		client.MatchingLabels{"app.kubernetes.io/name": "gadget-operator"}))
	return len(list.Items)
}

// settled waits until the published key is the sorted namespaces, the
// Deployment was restarted for it (annotation, status) and the deployment
// controller rolled it out, and returns the number of ReplicaSets then.
func settled(t *testing.T, namespaces []string, within time.Duration) int {
	t.Helper()
	want := slices.Sorted(slices.Values(namespaces))
	value := strings.Join(want, ",")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cm := &corev1.ConfigMap{}
		if !assert.NoError(c, k8sClient.Get(context.Background(), client.ObjectKey{Namespace: gadgetSystem, Name: gadgetScope}, cm)) {
			return
		}
		assert.Equal(c, value, cm.Data["namespaces"])
		si := &oriav1alpha1.ScopeInstance{}
		if !assert.NoError(c, k8sClient.Get(context.Background(), client.ObjectKey{Name: "gadget-operator"}, si)) {
			return
		}
		if assert.NotNil(c, si.Status.Publication) {
			assert.Equal(c, publish.Hash(value), si.Status.Publication.RestartedHash)
			assert.EqualValues(c, len(want), si.Status.Publication.LastRestartNamespaces)
		}
		d := &appsv1.Deployment{}
		if !assert.NoError(c, k8sClient.Get(context.Background(), client.ObjectKey{Namespace: gadgetSystem, Name: "gadget-operator"}, d)) {
			return
		}
		assert.Equal(c, publish.Hash(value), d.Spec.Template.Annotations[oriav1alpha1.AnnotationRestartedFor])
		assert.Equal(c, d.Generation, d.Status.ObservedGeneration, "rolled out")
	}, within, 200*time.Millisecond)
	return replicaSets(t)
}

// TestPublicationRestartsTheOperator applies the user guide's samples (the
// bundle's ScopeTemplate and Deployment, the admin's ScopeInstance) and
// checks the story: a labelled namespace enters the ConfigMap only once its
// binding exists and causes exactly one new ReplicaSet; an unchanged
// reconcile and an oria restart cause none; 200 namespaces labelled at once
// cause one; a namespace whose label is removed leaves the list.
func TestPublicationRestartsTheOperator(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	sys := testutil.Namespace(gadgetSystem, nil)
	require.NoError(t, k8sClient.Create(ctx, sys))
	cleanup(t, sys)
	applySample(t, "scoped-operator-bundle.yaml")
	applySample(t, "scoped-operator-instance.yaml")
	base := settled(t, []string{gadgetSystem}, time.Minute)
	t.Logf("%d ReplicaSet(s) after the first publication", base)

	// One namespace: it is published only once its RoleBinding exists.
	n1 := createNamespace(t, "gadgets", map[string]string{gadgetLabel: "true"})
	rb := binding.BindingName("gadget-operator", "gadget-operator")
	require.Eventually(t, func() bool {
		cm := &corev1.ConfigMap{}
		if k8sClient.Get(ctx, client.ObjectKey{Namespace: gadgetSystem, Name: gadgetScope}, cm) != nil ||
			!slices.Contains(strings.Split(cm.Data["namespaces"], ","), n1) {
			return false
		}
		require.NoError(t, k8sClient.Get(ctx, client.ObjectKey{Namespace: n1, Name: rb}, &rbacv1.RoleBinding{}),
			"%s is published before its RoleBinding exists", n1)
		return true
	}, time.Minute, 20*time.Millisecond)
	got := settled(t, []string{gadgetSystem, n1}, time.Minute)
	assert.Equal(t, base+1, got, "one new ReplicaSet for one new namespace")

	// Unchanged: no restart while nothing changes, nor when oria restarts.
	time.Sleep(2 * publish.DefaultQuiet)
	assert.Equal(t, base+1, replicaSets(t), "a restart without a change")
	oria.Stop()
	var err error
	oria, err = startOria(ctx)
	require.NoError(t, err)
	time.Sleep(2 * publish.DefaultQuiet)
	assert.Equal(t, base+1, settled(t, []string{gadgetSystem, n1}, time.Minute), "oria's restart restarted the operator")

	// 200 namespaces labelled at once: one restart.
	fast := fastClient(t)
	many := make([]string, 200)
	for i := range many {
		many[i] = fmt.Sprintf("%s-%03d", testutil.UniqueName("gadgets-many"), i)
	}
	parallel(t, many, func(n string) error { return fast.Create(ctx, testutil.Namespace(n, nil)) })
	t.Cleanup(func() {
		parallel(t, many, func(n string) error { return client.IgnoreNotFound(fast.Delete(ctx, testutil.Namespace(n, nil))) })
	})
	parallel(t, many, func(n string) error {
		patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"}}}`, gadgetLabel))
		return fast.Patch(ctx, testutil.Namespace(n, nil), patch)
	})
	all := append([]string{gadgetSystem, n1}, many...)
	got = settled(t, all, 2*time.Minute)
	time.Sleep(2 * publish.DefaultQuiet)
	assert.Equal(t, base+2, replicaSets(t), "200 namespaces labelled at once: one restart")

	// A namespace whose label is removed leaves the list, then loses its
	// binding.
	label(t, n1, nil)
	settled(t, slices.DeleteFunc(all, func(n string) bool { return n == n1 }), time.Minute)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.True(c, apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: n1, Name: rb}, &rbacv1.RoleBinding{})))
	}, time.Minute, 200*time.Millisecond)
	assert.Equal(t, base+3, replicaSets(t))
}

// parallel runs fn for every name, 20 at a time, and fails the test on the
// first error.
func parallel(t *testing.T, names []string, fn func(string) error) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, 20)
	)
	for _, n := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fn(n); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", n, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Empty(t, errs)
}

// TestPublicationGuard: a delegated user who may bind the template's roles
// may not publish into a ConfigMap or restart workloads they could not
// write themselves; once they may, the same instance is admitted.
func TestPublicationGuard(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns := createNamespace(t, "pub-guard", nil)
	user, asUser := delegate(t, "publisher")
	view := createBindableRole(t, user)
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("pub-guard"), []oriav1alpha1.ClusterRoleTemplate{{Name: view}}, testutil.User("someone"))
	require.NoError(t, k8sClient.Create(ctx, tmpl))
	cleanup(t, tmpl)
	si := scopeInstance(testutil.UniqueName("pub-guard"), tmpl.Name, ns)
	si.Spec.Publication = &oriav1alpha1.Publication{
		ConfigMap:     oriav1alpha1.ConfigMapKeyReference{Namespace: ns, Name: "scope"},
		RestartLabels: map[string]string{"app": "operator"},
	}
	refused(t, asUser.Create(ctx, si.DeepCopy(), client.DryRunAll),
		fmt.Sprintf(`user %q may not publish into ConfigMap "scope" in namespace %q (spec.publication)`, user, ns),
		`create configmaps "scope"`, `patch configmaps "scope"`, "patch deployments.apps")

	// The user may write the ConfigMap and patch workloads there.
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "publisher"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"scope"}, Verbs: []string{"create", "patch"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets", "daemonsets"}, Verbs: []string{"patch"}},
		},
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "publisher"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{testutil.User(user)},
	}
	for _, o := range []client.Object{role, rb} {
		require.NoError(t, k8sClient.Create(ctx, o))
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NoError(c, asUser.Create(ctx, si.DeepCopy(), client.DryRunAll))
	}, time.Minute, 200*time.Millisecond)
}

// createBindableRole creates a ClusterRole that user may bind anywhere.
func createBindableRole(t *testing.T, user string) string {
	t.Helper()
	ctx := context.Background()
	name := testutil.UniqueName("pub-view")
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get"}}}}
	binder := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name + "-binder"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, ResourceNames: []string{name}, Verbs: []string{"bind"}}}}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: binder.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: binder.Name},
		Subjects: []rbacv1.Subject{testutil.User(user)}}
	for _, o := range []client.Object{role, binder, crb} {
		require.NoError(t, k8sClient.Create(ctx, o))
	}
	cleanup(t, role, binder, crb)
	return name
}
