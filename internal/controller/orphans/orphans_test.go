package orphans_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller/orphans"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/testutil"
)

// otherUID is a UID no object has: an owner "deleted and created again
// under its name" as a controller reference records the old one.
const otherUID = types.UID("00000000-0000-0000-0000-000000000001")

// TestOrphanedBindingsDeleted: a binding labelled for an instance that
// does not exist (no ownerReference: the garbage collector removed it) and
// one whose controller reference names an instance that exists with
// another UID are deleted; healthy ones (controlled by a living instance;
// labelled, without a reference, for a living instance, a long name's
// hashed label value included) stay, and judging them writes nothing.
func TestOrphanedBindingsDeleted(t *testing.T) {
	testutil.NeedCluster(t)
	ns := testutil.CreateNamespace(t, k8sClient, "orphans", nil)
	si := instance(t, testutil.UniqueName("si"))
	long := instance(t, testutil.UniqueName(strings.Repeat("long", 20)))
	gone := testutil.UniqueName("gone")

	labelledForMissing := roleBinding(ns, "labelled-for-missing", gone)
	replaced := roleBinding(ns, "replaced", si.Name, instanceRef(si.Name, otherUID))
	healthy := roleBinding(ns, "healthy", si.Name, instanceRef(si.Name, si.UID))
	labelledForLiving := roleBinding(ns, "labelled-for-living", si.Name)
	labelledForLong := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("labelled-for-long"), Labels: ownership.InstanceLabels(long.Name, long.Name)},
		RoleRef:    healthy.RoleRef, Subjects: healthy.Subjects,
	}
	for _, o := range []client.Object{labelledForMissing, replaced, healthy, labelledForLiving, labelledForLong} {
		testutil.Create(t, k8sClient, o)
	}

	testutil.EventuallyGone(t, k8sClient, labelledForMissing, replaced)
	for _, o := range []client.Object{healthy, labelledForLiving, labelledForLong} {
		require.NoError(t, k8sClient.Get(context.Background(), client.ObjectKeyFromObject(o), o), "%s was deleted", o.GetName())
	}

	// Judging the healthy ones again writes nothing.
	r, writes := sweeper(t, nil)
	testutil.EventuallyCached(t, mgr.GetClient(), k8sClient, healthy, labelledForLiving, labelledForLong)
	for _, req := range []orphans.Request{
		request(orphans.KindRoleBinding, healthy), request(orphans.KindRoleBinding, labelledForLiving),
		request(orphans.KindClusterRoleBinding, labelledForLong),
	} {
		_, err := r.Reconcile(context.Background(), req)
		require.NoError(t, err)
	}
	assert.Zero(t, writes.Total(), "writes judging healthy bindings: %s", writes)
}

// TestSweepReadsAgainBeforeDeleting: an owner the cache does not show yet
// (created a moment ago) is not a missing one: the API server is asked
// before anything is deleted.
func TestSweepReadsAgainBeforeDeleting(t *testing.T) {
	testutil.NeedCluster(t)
	ns := testutil.CreateNamespace(t, k8sClient, "orphans-fresh", nil)
	si := instance(t, testutil.UniqueName("si"))
	byRef := roleBinding(ns, "by-ref", si.Name, instanceRef(si.Name, si.UID))
	byLabel := roleBinding(ns, "by-label", si.Name)
	for _, o := range []client.Object{byRef, byLabel} {
		testutil.Create(t, k8sClient, o)
	}
	testutil.EventuallyCached(t, mgr.GetClient(), k8sClient, byRef, byLabel)

	// A view of the cache in which no instance exists yet.
	r, writes := sweeper(t, orphans.OwnerSet{ownership.KindScopeInstance: {}})
	for _, o := range []client.Object{byRef, byLabel} {
		_, err := r.Reconcile(context.Background(), request(orphans.KindRoleBinding, o))
		require.NoError(t, err)
		require.NoError(t, k8sClient.Get(context.Background(), client.ObjectKeyFromObject(o), o), "%s was deleted", o.GetName())
	}
	assert.Zero(t, writes.Total(), "writes: %s", writes)

	// The same view, the instance gone from the API server too: deleted.
	require.NoError(t, k8sClient.Delete(context.Background(), si))
	testutil.EventuallyGone(t, k8sClient, si)
	for _, o := range []client.Object{byRef, byLabel} {
		_, err := r.Reconcile(context.Background(), request(orphans.KindRoleBinding, o))
		require.NoError(t, err)
	}
	testutil.EventuallyGone(t, k8sClient, byRef, byLabel)
}

// TestOrphanedRolesAndCompiledObjectsDeleted: an inline ClusterRole of a
// missing template, and a ScopeInstance compiled from a missing RBACPolicy
// (its controller reference removed), are deleted; a compiled instance
// whose policy exists stays until the policy is deleted ("when seen": the
// owner's deletion brings its dependents without a controller reference).
func TestOrphanedRolesAndCompiledObjectsDeleted(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{
		Name:            testutil.UniqueName("orphan-inline"),
		Labels:          ownership.TemplateLabels("gone-template"),
		OwnerReferences: []metav1.OwnerReference{ownership.Ref(ownership.KindScopeTemplate, "gone-template", otherUID)},
	}}
	compiledForMissing := compiled(testutil.UniqueName("gone-policy"))
	testutil.Create(t, k8sClient, role)
	testutil.Create(t, k8sClient, compiledForMissing)
	testutil.EventuallyGone(t, k8sClient, role, compiledForMissing)

	policy := &oriav1alpha1.RBACPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("policy")},
		Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: "ext", Access: oriav1alpha1.AccessView,
			Subjects: []rbacv1.Subject{testutil.User("orphan-user")}},
	}
	testutil.Create(t, k8sClient, policy)
	compiledForLiving := compiled(policy.Name)
	testutil.Create(t, k8sClient, compiledForLiving)
	testutil.EventuallyCached(t, mgr.GetClient(), k8sClient, policy, compiledForLiving)
	r, writes := sweeper(t, nil)
	_, err := r.Reconcile(ctx, request(orphans.KindScopeInstance, compiledForLiving))
	require.NoError(t, err)
	assert.Zero(t, writes.Total(), "writes: %s", writes)
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKeyFromObject(compiledForLiving), compiledForLiving),
		"the compiled instance of a living policy was deleted")

	require.NoError(t, k8sClient.Delete(ctx, policy))
	testutil.EventuallyGone(t, k8sClient, compiledForLiving)
}

// compiled is a ScopeInstance as the RBACPolicy controller compiles it for
// the named policy, as the garbage collector leaves it when the policy is
// deleted with orphaning: labels, no controller reference.
func compiled(policy string) *oriav1alpha1.ScopeInstance {
	return &oriav1alpha1.ScopeInstance{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("compiled"), Labels: ownership.PolicyLabels(policy)},
		Spec:       oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: "t", Namespaces: []string{"default"}},
	}
}
