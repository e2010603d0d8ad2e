package rbacpolicy_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	policymodel "github.com/operator-framework/oria/internal/policy"
	"github.com/operator-framework/oria/internal/testutil"
)

// alicePolicy returns (without creating it) a policy named name that grants
// alice view access to the extension, cluster-wide.
func alicePolicy(name, ext string) *oriav1alpha1.RBACPolicy {
	return &oriav1alpha1.RBACPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: ext, Access: oriav1alpha1.AccessView,
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "alice"}}},
	}
}

func TestConflictWithForeignTemplate(t *testing.T) {
	testutil.NeedCluster(t)
	ext, _ := installed(t, oriav1alpha1.RBACModeFineGrained, "conflict", "crates")
	name := testutil.UniqueName("policy")
	foreign := &oriav1alpha1.ScopeTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: policymodel.ObjectName(name)},
		Spec: oriav1alpha1.ScopeTemplateSpec{
			ClusterRoles:    []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}},
			BindingTemplate: oriav1alpha1.BindingTemplate{Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "someone"}}},
		},
	}
	testutil.Create(t, k8sClient, foreign)

	p := alicePolicy(name, ext.Name)
	testutil.Create(t, k8sClient, p)
	got := waitReady(t, name, oriav1alpha1.ReasonConflict)
	assert.Contains(t, readyMessage(got), fmt.Sprintf("ScopeTemplate %q exists and was not created by this RBACPolicy", foreign.Name))

	after := &oriav1alpha1.ScopeTemplate{}
	require.NoError(t, k8sClient.Get(context.Background(), client.ObjectKeyFromObject(foreign), after))
	assert.Equal(t, foreign.Spec, after.Spec, "a foreign template is never modified")
	assert.Empty(t, after.OwnerReferences)

	// Deleting the policy leaves the foreign template alone.
	require.NoError(t, k8sClient.Delete(context.Background(), p))
	require.Never(t, func() bool {
		return apierrors.IsNotFound(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(foreign), after))
	}, 2*time.Second, 100*time.Millisecond)
}

func TestConflictResolvesWhenForeignObjectGoes(t *testing.T) {
	testutil.NeedCluster(t)
	ext, _ := installed(t, oriav1alpha1.RBACModeFineGrained, "resolve", "crates")
	name := testutil.UniqueName("policy")
	foreign := &oriav1alpha1.ScopeInstance{
		ObjectMeta: metav1.ObjectMeta{Name: policymodel.ObjectName(name)},
		Spec:       oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: "someone-elses"},
	}
	require.NoError(t, k8sClient.Create(context.Background(), foreign))
	testutil.Create(t, k8sClient, alicePolicy(name, ext.Name))
	got := waitReady(t, name, oriav1alpha1.ReasonConflict)
	assert.Contains(t, readyMessage(got), fmt.Sprintf("ScopeInstance %q exists", foreign.Name))

	// Nothing about the policy changes, yet it recovers once the foreign
	// object is gone.
	require.NoError(t, k8sClient.Delete(context.Background(), foreign))
	waitReady(t, name, oriav1alpha1.ReasonProgressing)
	getTemplate(t, name)
}

// TestCompiledObjectsAreRestored: an edit of the compiled objects (spec or
// oria's labels) is undone, and a deleted one comes back.
func TestCompiledObjectsAreRestored(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ext, group := installed(t, oriav1alpha1.RBACModeFineGrained, "drift", "gears")
	p := newPolicy(t, ext.Name, oriav1alpha1.AccessView)
	eventuallyTemplateRoles(t, p.Name, "gears."+group+"-view", "gears."+group+"-view-crdview")
	want := getTemplate(t, p.Name)

	for _, edit := range []func(*oriav1alpha1.ScopeTemplate){
		func(st *oriav1alpha1.ScopeTemplate) { st.Labels[oriav1alpha1.LabelRBACPolicy] = "someone-else" },
		func(st *oriav1alpha1.ScopeTemplate) {
			st.Spec.BindingTemplate.Subjects = []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "mallory"}}
		},
	} {
		st := &oriav1alpha1.ScopeTemplate{ObjectMeta: metav1.ObjectMeta{Name: want.Name}}
		testutil.Update(t, k8sClient, st, func() { edit(st) })
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			st := &oriav1alpha1.ScopeTemplate{}
			require.NoError(c, k8sClient.Get(ctx, client.ObjectKeyFromObject(want), st))
			assert.Equal(c, want.Spec, st.Spec)
			assert.Equal(c, p.Name, st.Labels[oriav1alpha1.LabelRBACPolicy])
		}, testutil.Timeout, testutil.Interval)
	}

	si := &oriav1alpha1.ScopeInstance{}
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKey{Name: policymodel.ObjectName(p.Name)}, si))
	require.NoError(t, k8sClient.Delete(ctx, si))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &oriav1alpha1.ScopeInstance{}
		require.NoError(c, k8sClient.Get(ctx, client.ObjectKeyFromObject(si), got))
		assert.NotEqual(c, si.UID, got.UID, "recreated")
		assert.Equal(c, []string{"team-a"}, got.Spec.Namespaces)
	}, testutil.Timeout, testutil.Interval)
	assert.Equal(t, []string{"gears." + group + "-view", "gears." + group + "-view-crdview"}, templateRoles(want))
}
