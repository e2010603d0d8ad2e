package orphans_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller"
	"github.com/operator-framework/oria/internal/controller/orphans"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/testutil"
)

var (
	// k8sClient is an uncached admin client: tests assert on the API
	// server's state, not on a cache.
	k8sClient client.Client
	// mgr runs only the sweep: the tests make the objects oria's other
	// controllers would have made, and their owners, by hand.
	mgr ctrl.Manager
	// deps are the sweep's, as controller.SetupAll makes them.
	deps orphans.Deps
)

func TestMain(m *testing.M) {
	testutil.RunWithManager(m, &k8sClient, &mgr, func(mg ctrl.Manager) error {
		s, err := controller.NewShared(mg, engine.Unobserved)
		if err != nil {
			return err
		}
		if deps, err = s.OrphansDeps(mg); err != nil {
			return err
		}
		return orphans.SetupWithManager(mg, deps, orphans.Options{})
	})
}

// instance creates a ScopeInstance (nothing reconciles it here) and deletes
// it when the test ends.
func instance(t *testing.T, name string) *oriav1alpha1.ScopeInstance {
	t.Helper()
	si := &oriav1alpha1.ScopeInstance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: name, Namespaces: []string{"default"}},
	}
	testutil.Create(t, k8sClient, si)
	return si
}

// roleBinding is a RoleBinding as oria makes them for an instance (labels
// through ownership.InstanceLabels), controlled by refs (none: as the
// garbage collector leaves it when the instance was deleted with
// orphaning).
func roleBinding(ns, name, instance string, refs ...metav1.OwnerReference) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: ownership.InstanceLabels(instance, instance), OwnerReferences: refs},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{testutil.User("orphan-user")},
	}
}

// instanceRef is the controller reference oria sets on an instance's
// bindings.
func instanceRef(name string, uid types.UID) metav1.OwnerReference {
	return ownership.Ref(ownership.KindScopeInstance, name, uid)
}

// sweeper returns a Reconciler of the sweep over the suite's manager whose
// writes are counted, judging on owners (nil: the manager's cache).
func sweeper(t *testing.T, owners orphans.Owners) (*orphans.Reconciler, *testutil.WriteCounter) {
	t.Helper()
	if owners == nil {
		cached, err := orphans.NewCachedOwners(context.Background(), mgr.GetCache())
		require.NoError(t, err)
		owners = cached
	}
	c, writes := testutil.CountingClient(mgr.GetClient())
	d := deps
	d.Client, d.Owners = c, owners
	r, err := orphans.New(d)
	require.NoError(t, err)
	return r, writes
}

// request is the sweep's request for obj.
func request(kind string, obj client.Object) orphans.Request {
	return orphans.Request{Kind: kind, NamespacedName: client.ObjectKeyFromObject(obj)}
}
