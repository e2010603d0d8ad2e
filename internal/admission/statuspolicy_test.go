package admission

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/localcluster"
)

// TestStatusPolicy (issue 38, case 4): the guard's ValidatingAdmissionPolicy
// (config/webhook/status-policy.yaml) refuses a write to the status of an
// oria object by a user who may update that subresource but may not bind
// and escalate every ClusterRole: such a user moved the pinned UID of a
// re-created namespace, and oria bound in the new namespace. oria (here: the
// admin) still writes it.
func TestStatusPolicy(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	admin, err := testutil.AdminClient(cluster)
	require.NoError(t, err)
	objs, err := localcluster.StatusPolicyObjects()
	require.NoError(t, err)
	for _, u := range objs {
		require.NoError(t, admin.Create(ctx, u))
		t.Cleanup(func() { _ = admin.Delete(ctx, u) })
	}

	user := testutil.UniqueName("status-writer")
	role := &rbacv1.ClusterRole{Rules: []rbacv1.PolicyRule{{APIGroups: []string{oriav1alpha1.GroupVersion.Group},
		Resources: []string{"scopeinstances/status", "scopetemplates/status", "rbacpolicies/status"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{oriav1alpha1.GroupVersion.Group}, Resources: []string{"scopeinstances"}, Verbs: []string{"get"}}}}
	role.Name = user
	require.NoError(t, admin.Create(ctx, role))
	crb := &rbacv1.ClusterRoleBinding{RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	crb.Name = user
	require.NoError(t, admin.Create(ctx, crb))
	t.Cleanup(func() { _ = admin.Delete(ctx, crb); _ = admin.Delete(ctx, role) })

	si := &oriav1alpha1.ScopeInstance{Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: "t", Namespaces: []string{"phx"}}}
	si.Name = testutil.UniqueName("si")
	require.NoError(t, admin.Create(ctx, si))
	t.Cleanup(func() { _ = admin.Delete(ctx, si) })

	cfg := rest.CopyConfig(cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	as, err := client.New(cfg, client.Options{Scheme: admin.Scheme()})
	require.NoError(t, err)
	forge := func(c client.Client, uid string) error {
		cur := &oriav1alpha1.ScopeInstance{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(si), cur); err != nil {
			return err
		}
		cur.Status.NamespaceUIDs = map[string]string{"phx": uid}
		return c.Status().Update(ctx, cur)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := forge(as, "forged")
		if !assert.Error(c, err, "the policy is in force") {
			return
		}
		assert.True(c, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "%v", err)
		assert.Contains(c, err.Error(), `the status of a ScopeInstance is written by oria alone`)
	}, testutil.Timeout, testutil.Interval)
	require.NoError(t, forge(admin, "oria's"), "oria (a user who may bind and escalate every ClusterRole) writes status")
}
