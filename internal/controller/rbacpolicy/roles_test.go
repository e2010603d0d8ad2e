package rbacpolicy_test

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
	"github.com/operator-framework/oria/internal/genroles"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestForeignRoleIsNotBound (issue 29, case 5): a ClusterRole made by hand
// under a generated name while the extension is Unmanaged is never bound by
// a policy once the admin sets FineGrained: the policy binds the other
// roles, says Conflict naming the role (never Bound, even when the instance
// is), and records a Warning event. Once the admin deletes the role, oria
// generates its own and the policy binds it within the recheck interval.
func TestForeignRoleIsNotBound(t *testing.T) {
	testutil.NeedCluster(t)
	for _, tc := range []struct {
		name  string
		rules func(crd string) []rbacv1.PolicyRule
		why   string
	}{{
		name: "secrets read",
		rules: func(crd string) []rbacv1.PolicyRule {
			return append(genroles.Rules(crd, names.RoleView),
				rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
		},
	}, {
		name: "an admin's leftover role without watch",
		rules: func(crd string) []rbacv1.PolicyRule {
			r := genroles.Rules(crd, names.RoleView)
			r[0].Verbs = []string{"get", "list"}
			return r
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ext, group := installed(t, oriav1alpha1.RBACModeUnmanaged, "foreign", "things")
			crd := "things." + group
			view, crdview := names.ExtensionRole(crd, names.RoleView), names.ExtensionRole(crd, names.RoleViewCRDView)
			foreign := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: view}, Rules: tc.rules(crd)}
			testutil.Create(t, k8sClient, foreign)

			testutil.SetRBACMode(t, k8sClient, ext.Name, oriav1alpha1.RBACModeFineGrained)
			p := newPolicy(t, ext.Name, oriav1alpha1.AccessView, func(s *oriav1alpha1.RBACPolicySpec) {
				s.Subjects = []rbacv1.Subject{testutil.ServiceAccount("deployer", "ci")}
			})
			eventuallyTemplateRoles(t, p.Name, crdview)
			waitMessage(t, p.Name, oriav1alpha1.ReasonConflict, `ClusterRole "`+view+`" exists and was neither created by oria`)
			testutil.EventuallyEvents(t, k8sClient, "RBACPolicy", p.Name, oriav1alpha1.ReasonConflict)

			// The instance binding what is left does not make it Bound.
			markInstance(t, p.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound, "bound", "team-a")
			require.Never(t, func() bool {
				got := &oriav1alpha1.RBACPolicy{}
				if k8sClient.Get(ctx, client.ObjectKeyFromObject(p), got) != nil {
					return false
				}
				c := meta.FindStatusCondition(got.Status.Conditions, oriav1alpha1.TypeReady)
				return c == nil || c.Status == metav1.ConditionTrue || c.Reason != oriav1alpha1.ReasonConflict
			}, 2*time.Second, 100*time.Millisecond, "the policy left Conflict")
			st := getTemplate(t, p.Name)
			assert.Equal(t, []string{crdview}, templateRoles(st), "the foreign role is bound")

			// The admin deletes it: oria generates its own, the policy binds
			// it, and is Bound once the instance says so.
			require.NoError(t, k8sClient.Delete(ctx, foreign))
			eventuallyTemplateRoles(t, p.Name, view, crdview)
			cr := &rbacv1.ClusterRole{}
			require.NoError(t, k8sClient.Get(ctx, client.ObjectKey{Name: view}, cr))
			assert.Equal(t, genroles.Rules(crd, names.RoleView), cr.Rules)
			markInstance(t, p.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound, "bound", "team-a")
			waitReady(t, p.Name, oriav1alpha1.ReasonBound)
		})
	}
}

// TestChangedRoleIsWithheld: an oria role someone edits is withheld by the
// policy until it is restored. (The extension's mode is made invalid first,
// so that the extension controller leaves the edit in place: it restores
// the role at once otherwise.)
func TestChangedRoleIsWithheld(t *testing.T) {
	testutil.NeedCluster(t)
	ext, group := installed(t, oriav1alpha1.RBACModeFineGrained, "changed", "things")
	crd := "things." + group
	view, crdview := names.ExtensionRole(crd, names.RoleView), names.ExtensionRole(crd, names.RoleViewCRDView)
	p := newPolicy(t, ext.Name, oriav1alpha1.AccessView)
	eventuallyTemplateRoles(t, p.Name, view, crdview)

	testutil.SetRBACMode(t, k8sClient, ext.Name, "Bogus")
	waitMessage(t, p.Name, oriav1alpha1.ReasonProgressing, `invalid oria.operatorframework.io/rbac-mode annotation "Bogus"`)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: view}}
	testutil.Update(t, k8sClient, role, func() {
		role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
	})
	eventuallyTemplateRoles(t, p.Name, crdview)
	testutil.EventuallyEvents(t, k8sClient, "RBACPolicy", p.Name, "Narrowed")
	// Not Bound, naming the role: InvalidMode while what is in force
	// differs from what the spec asks (the reconcile that narrows), then
	// Progressing once the narrowed grant is in force and only the
	// withheld role is missing (it waits for oria to restore it). Which
	// one a poll sees first is a matter of timing.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &oriav1alpha1.RBACPolicy{}
		require.NoError(c, k8sClient.Get(context.Background(), client.ObjectKey{Name: p.Name}, got))
		cond := meta.FindStatusCondition(got.Status.Conditions, oriav1alpha1.TypeReady)
		require.NotNil(c, cond)
		assert.Equal(c, metav1.ConditionFalse, cond.Status)
		assert.Contains(c, []string{oriav1alpha1.ReasonInvalidMode, oriav1alpha1.ReasonProgressing}, cond.Reason)
		assert.Contains(c, cond.Message, view)
	}, testutil.Timeout, testutil.Interval)

	// Back to FineGrained: the extension controller restores the role, the
	// policy binds it again.
	testutil.SetRBACMode(t, k8sClient, ext.Name, oriav1alpha1.RBACModeFineGrained)
	eventuallyTemplateRoles(t, p.Name, view, crdview)
}
