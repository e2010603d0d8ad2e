package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/eligibility"
	"github.com/operator-framework/oria/internal/genroles"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestActivationWithholdsAHandMadeRole: an activation binds no role its
// policy would withhold. While the extension is Unmanaged, a user who may
// create ClusterRoles but not bind them makes <plural>.<group>-view with
// secrets read. The admin sets FineGrained and makes devs eligible for view
// (self-activation). alice activates: the request is Active, its grant
// names no hand-made role, says which role it left out, and alice reads
// neither secrets nor the API through it.
func TestActivationWithholdsAHandMadeRole(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	crd := extensionWithAPI(t, oriav1alpha1.RBACModeUnmanaged)
	ext := crd.Labels[oriav1alpha1.LabelOLMOwnerName]
	plural, group := crd.Spec.Names.Plural, crd.Spec.Group
	view := names.ExtensionRole(crd.Name, names.RoleView)

	secrets := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}}
	squatted := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: view}, Rules: append(genroles.Rules(crd.Name, names.RoleView), secrets)}
	require.NoError(t, roleMaker(t).Create(ctx, squatted), "creating ClusterRoles is all it takes")
	cleanup(t, squatted)
	testutil.SetRBACMode(t, k8sClient, ext, oriav1alpha1.RBACModeFineGrained)
	waitExtensionCondition(t, ext, metav1.ConditionFalse, oriav1alpha1.ReasonConflict)

	ns := createNamespace(t, "eligible-squat", nil)
	alice, devs := testutil.UniqueName("alice"), testutil.UniqueName("devs")
	requesters(t, alice)
	asAlice := impersonate(t, alice, devs)
	policy := &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("devs-view")}, Spec: oriav1alpha1.RBACPolicySpec{
		ExtensionName: ext, Access: oriav1alpha1.AccessView, Namespaces: []string{ns},
		Subjects:    []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: devs}},
		Eligibility: &oriav1alpha1.Eligibility{MaxDuration: metav1.Duration{Duration: time.Hour}},
	}}
	testutil.Create(t, k8sClient, policy.DeepCopy())
	cleanup(t, policy)
	waitReason(t, policy, metav1.ConditionFalse, oriav1alpha1.ReasonEligible)

	req := accessRequest(policy.Name, alice, devs, 10*time.Minute, "on call", ns)
	require.NoError(t, asAlice.Create(ctx, req), "a self-activation")
	cleanup(t, req)
	got := waitState(t, req, oriav1alpha1.StateActive)

	alicein := func(verb, g, resource string) testutil.Access {
		return testutil.Access{User: alice, Groups: []string{devs}, Verb: verb, Group: g, Resource: resource, Namespace: ns}
	}
	// Given time to be bound, the hand-made role reaches nobody.
	time.Sleep(2 * time.Second)
	eventuallyAccess(t, false, alicein("get", "", "secrets"), alicein("list", "", "secrets"), alicein("list", group, plural))
	// The activation's template binds what the policy would: not the
	// hand-made role, and says so.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, k8sClient.Get(ctx, client.ObjectKey{Name: req.Name}, got))
		cond := meta.FindStatusCondition(got.Status.Conditions, oriav1alpha1.TypeActive)
		require.NotNil(c, cond)
		assert.Contains(c, cond.Message, `ClusterRole "`+view+`"`)
	}, testutil.Timeout, 100*time.Millisecond)
	tmpl := &oriav1alpha1.ScopeTemplate{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Name: eligibility.ObjectName(req.Name)}, tmpl); err == nil {
		for _, r := range tmpl.Spec.ClusterRoles {
			assert.NotEqual(t, view, r.Name, "the activation names the hand-made role")
		}
	}
}
