package scopetemplate_test

import (
	"context"
	"testing"
	"time"

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
	"github.com/operator-framework/oria/internal/controller/scopetemplate"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/testutil"
)

var (
	// k8sClient is an uncached admin client: tests assert on the API
	// server's state, not on a cache.
	k8sClient client.Client
	// mgr runs only the ScopeTemplate controller; tests create
	// ScopeInstances as plain objects (no bindings are written here).
	mgr ctrl.Manager
	// deps are the controller's, as controller.SetupAll makes them.
	deps scopetemplate.Deps
)

func TestMain(m *testing.M) {
	testutil.RunWithManager(m, &k8sClient, &mgr, func(mg ctrl.Manager) error {
		s, err := controller.NewShared(mg, engine.Unobserved)
		if err != nil {
			return err
		}
		deps = s.ScopeTemplateDeps(mg)
		return scopetemplate.SetupWithManager(mg, deps, scopetemplate.Options{MaxConcurrentReconciles: 4, ConflictRecheckInterval: time.Second})
	})
}

var podRules = testutil.PodReaderRules()

func newInstance(name, template string) *oriav1alpha1.ScopeInstance {
	return &oriav1alpha1.ScopeInstance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: template, Namespaces: []string{"default"}},
	}
}

// create creates obj and deletes it when the test ends.
func create(t *testing.T, obj client.Object) {
	t.Helper()
	testutil.Create(t, k8sClient, obj)
}

func get[T client.Object](t require.TestingT, name string, obj T) T {
	require.NoError(t, k8sClient.Get(context.Background(), types.NamespacedName{Name: name}, obj))
	return obj
}

func notFound(name string, obj client.Object) bool {
	return apierrors.IsNotFound(k8sClient.Get(context.Background(), types.NamespacedName{Name: name}, obj))
}

// clusterRole is a ClusterRole, by name only.
func clusterRole(name string) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// eventuallyReady waits for the template's Ready condition (for its current
// generation) to have status and reason, and returns the template.
func eventuallyReady(t *testing.T, name string, status metav1.ConditionStatus, reason string) *oriav1alpha1.ScopeTemplate {
	t.Helper()
	st, _ := testutil.EventuallyCondition(t, k8sClient, &oriav1alpha1.ScopeTemplate{ObjectMeta: metav1.ObjectMeta{Name: name}},
		testutil.Condition{Type: oriav1alpha1.TypeReady, Status: status, Reason: reason})
	return st
}

func readyMessage(t require.TestingT, name string) string {
	st := get(t, name, &oriav1alpha1.ScopeTemplate{})
	if c := meta.FindStatusCondition(st.Status.Conditions, oriav1alpha1.TypeReady); c != nil {
		return c.Message
	}
	return ""
}

// update reads obj (by its name and namespace), applies change and writes
// it back, again if a controller wrote the object in between.
func update[T client.Object](t *testing.T, obj T, change func()) {
	t.Helper()
	testutil.Update(t, k8sClient, obj, change)
}
