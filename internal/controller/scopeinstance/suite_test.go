package scopeinstance_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller"
	"github.com/operator-framework/oria/internal/controller/scopeinstance"
	"github.com/operator-framework/oria/internal/controller/scopetemplate"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/publish"
	"github.com/operator-framework/oria/internal/testutil"
)

var (
	// k8sClient is an uncached admin client: tests assert on the API
	// server's state, not on a cache.
	k8sClient client.Client
	// mgr runs the ScopeTemplate and ScopeInstance controllers for the
	// whole package; tests use their own names and namespaces.
	mgr ctrl.Manager
	// deps are the ScopeInstance controller's, as controller.SetupAll
	// makes them: a Reconciler a test builds shares them.
	deps scopeinstance.Deps
)

func TestMain(m *testing.M) {
	testutil.RunWithManager(m, &k8sClient, &mgr, func(mg ctrl.Manager) error {
		s, err := controller.NewShared(mg, engine.Unobserved)
		if err != nil {
			return err
		}
		deps = s.ScopeInstanceDeps(mg)
		return errors.Join(
			scopetemplate.SetupWithManager(mg, s.ScopeTemplateDeps(mg), scopetemplate.Options{MaxConcurrentReconciles: 4, ConflictRecheckInterval: time.Second}),
			scopeinstance.SetupWithManager(mg, deps, scopeinstance.Options{MaxConcurrentReconciles: 4, ConflictRecheckInterval: time.Second,
				Timing: publish.Timing{Quiet: time.Second}, ExpiryWarning: 2 * time.Second}),
		)
	})
}

// Fixtures.

var podRules = testutil.PodReaderRules()

// podReader creates a ClusterRole that may list pods, for tests that check
// access: the built-in view role gets its rules from the aggregation
// controller, which the integration control plane does not run.
func podReader(t *testing.T) string {
	t.Helper()
	name := testutil.UniqueName("pod-reader")
	create(t, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: podRules})
	return name
}

func newInstance(name, template string, namespaces []string, selector *metav1.LabelSelector) *oriav1alpha1.ScopeInstance {
	return &oriav1alpha1.ScopeInstance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: oriav1alpha1.ScopeInstanceSpec{
			ScopeTemplateName: template,
			Namespaces:        namespaces,
			NamespaceSelector: selector,
		},
	}
}

func matchLabels(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

// create creates obj and deletes it when the test ends.
func create(t *testing.T, obj client.Object) {
	t.Helper()
	testutil.Create(t, k8sClient, obj)
}

// namespace creates a namespace named prefix-<random> with labels; it is
// deleted when the test ends.
func namespace(t *testing.T, prefix string, labels map[string]string) string {
	t.Helper()
	return testutil.CreateNamespace(t, k8sClient, prefix, labels)
}

func get[T client.Object](t require.TestingT, name, ns string, obj T) T {
	require.NoError(t, k8sClient.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj))
	return obj
}

// ready returns the Ready condition of the named instance, nil if unset or
// not about the current generation.
func ready(t require.TestingT, name string) (*oriav1alpha1.ScopeInstance, *metav1.Condition) {
	si := get(t, name, "", &oriav1alpha1.ScopeInstance{})
	c := meta.FindStatusCondition(si.Status.Conditions, oriav1alpha1.TypeReady)
	if c == nil || si.Status.ObservedGeneration != si.Generation || c.ObservedGeneration != si.Generation {
		return si, nil
	}
	return si, c
}

// eventuallyReady waits for the instance's Ready condition to have status
// and reason, and returns the instance.
func eventuallyReady(t *testing.T, name string, status metav1.ConditionStatus, reason string) *oriav1alpha1.ScopeInstance {
	t.Helper()
	si, _ := testutil.EventuallyCondition(t, k8sClient, &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: name}},
		testutil.Condition{Type: oriav1alpha1.TypeReady, Status: status, Reason: reason})
	return si
}

// roleBindingNamespaces returns the namespaces (sorted) in which a
// RoleBinding of instance for role exists.
func roleBindingNamespaces(t require.TestingT, instance, role string) []string {
	var list rbacv1.RoleBindingList
	require.NoError(t, k8sClient.List(context.Background(), &list,
		client.MatchingLabels{oriav1alpha1.LabelScopeInstance: instance}))
	var out []string
	for _, rb := range list.Items {
		if rb.RoleRef.Name == role {
			out = append(out, rb.Namespace)
		}
	}
	slices.Sort(out)
	return out
}

// eventuallyBoundIn waits until the RoleBindings of instance for role exist
// in exactly namespaces.
func eventuallyBoundIn(t *testing.T, instance, role string, namespaces ...string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.ElementsMatch(c, namespaces, roleBindingNamespaces(c, instance, role))
	}, testutil.Timeout, testutil.Interval)
}

func notFound(name, ns string, obj client.Object) bool {
	err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj)
	return apierrors.IsNotFound(err)
}

// update reads obj (by its name and namespace), applies change and writes
// it back, again if a controller wrote the object in between.
func update[T client.Object](t *testing.T, obj T, change func()) {
	t.Helper()
	testutil.Update(t, k8sClient, obj, change)
}

// clusterRoleBinding is a ClusterRoleBinding, by name only.
func clusterRoleBinding(name string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}}
}
