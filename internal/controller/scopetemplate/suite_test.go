package scopetemplate_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller/scopetemplate"
	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/localcluster"
)

var (
	cluster *localcluster.Cluster
	// k8sClient is an uncached admin client: tests assert on the API
	// server's state, not on a cache.
	k8sClient client.Client
	// mgr runs only the ScopeTemplate controller; tests create
	// ScopeInstances as plain objects (no bindings are written here).
	mgr ctrl.Manager
)

const (
	timeout  = 30 * time.Second
	interval = 50 * time.Millisecond
)

func TestMain(m *testing.M) {
	testutil.RunWithManager(m, &cluster, &k8sClient, &mgr, func(mg ctrl.Manager) error {
		return scopetemplate.SetupWithManager(mg, scopetemplate.Options{MaxConcurrentReconciles: 4, ConflictRecheckInterval: time.Second})
	})
}

var podRules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}}

func user(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, Name: name, APIGroup: rbacv1.GroupName}
}

func newTemplate(name string, roles []oriav1alpha1.ClusterRoleTemplate, subjects ...rbacv1.Subject) *oriav1alpha1.ScopeTemplate {
	return &oriav1alpha1.ScopeTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: oriav1alpha1.ScopeTemplateSpec{
			ClusterRoles:    roles,
			BindingTemplate: oriav1alpha1.BindingTemplate{Subjects: subjects},
		},
	}
}

func newInstance(name, template string) *oriav1alpha1.ScopeInstance {
	return &oriav1alpha1.ScopeInstance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: template, Namespaces: []string{"default"}},
	}
}

// create creates obj and deletes it when the test ends.
func create(t *testing.T, obj client.Object) {
	t.Helper()
	require.NoError(t, k8sClient.Create(context.Background(), obj))
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), obj) })
}

func get[T client.Object](t require.TestingT, name string, obj T) T {
	require.NoError(t, k8sClient.Get(context.Background(), types.NamespacedName{Name: name}, obj))
	return obj
}

func notFound(t require.TestingT, name string, obj client.Object) bool {
	return apierrors.IsNotFound(k8sClient.Get(context.Background(), types.NamespacedName{Name: name}, obj))
}

// eventuallyReady waits for the template's Ready condition (for its current
// generation) to have status and reason, and returns the template.
func eventuallyReady(t *testing.T, name string, status metav1.ConditionStatus, reason string) *oriav1alpha1.ScopeTemplate {
	t.Helper()
	var st *oriav1alpha1.ScopeTemplate
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st = get(c, name, &oriav1alpha1.ScopeTemplate{})
		cond := meta.FindStatusCondition(st.Status.Conditions, oriav1alpha1.TypeReady)
		if assert.NotNil(c, cond) && assert.Equal(c, st.Generation, cond.ObservedGeneration) {
			assert.Equal(c, st.Generation, st.Status.ObservedGeneration)
			assert.Equal(c, status, cond.Status, cond.Message)
			assert.Equal(c, reason, cond.Reason, cond.Message)
		}
	}, timeout, interval)
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
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change()
		return k8sClient.Update(context.Background(), obj)
	}))
}
