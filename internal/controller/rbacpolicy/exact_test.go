package rbacpolicy_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriaac "github.com/operator-framework/oria/api/applyconfiguration/api/v1alpha1"
	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/olm"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestCompiledSpecIsExact: whatever another field manager wrote into a
// compiled instance (a server-side apply adding a namespace, a merge patch,
// a whole-object update), the policy controller puts back exactly the
// compiled spec: no field of someone else's survives. (No guard runs in this
// suite: this is the controller's own defence; test/e2e shows the guard
// refusing the same writes.)
func TestCompiledSpecIsExact(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ext, _ := installed(t, oriav1alpha1.RBACModeFineGrained, "exact", "widgets")
	p := newPolicy(t, ext.Name, oriav1alpha1.AccessView)
	_, si := compiled(p.Name)
	si = testutil.EventuallyGet(t, k8sClient, si)
	want := si.Spec

	for name, write := range map[string]func() error{
		"server-side apply by another manager": func() error {
			ac := oriaac.ScopeInstance(si.Name).WithSpec(oriaac.ScopeInstanceSpec().
				WithScopeTemplateName(si.Spec.ScopeTemplateName).WithNamespaces(append(si.Spec.Namespaces, "victim")...))
			return k8sClient.Apply(ctx, ac, client.FieldOwner("mallory"), client.ForceOwnership)
		},
		"merge patch": func() error {
			return k8sClient.Patch(ctx, &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: si.Name}},
				client.RawPatch(types.MergePatchType, []byte(`{"spec":{"namespaces":["team-a","victim"]}}`)))
		},
		"replace": func() error {
			cur := &oriav1alpha1.ScopeInstance{}
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(si), cur); err != nil {
				return err
			}
			// namespaces and namespaceSelector are exclusive in the schema:
			// a selector for every namespace instead of the list.
			cur.Spec.ScopeTemplateName = "someone-elses"
			cur.Spec.Namespaces, cur.Spec.NamespaceSelector = nil, &metav1.LabelSelector{}
			return k8sClient.Update(ctx, cur, client.FieldOwner("kubectl-replace"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, write())
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				got := &oriav1alpha1.ScopeInstance{}
				require.NoError(c, k8sClient.Get(ctx, client.ObjectKeyFromObject(si), got))
				assert.Equal(c, want, got.Spec)
			}, testutil.Timeout, testutil.Interval)
		})
	}
}

// TestBundleRoleTooBroadIsWithheld: a bundle-provided -view role that
// reaches beyond the extension (secrets) is not bound by a view policy; the
// crdview role still is, and the policy says what it withheld.
func TestBundleRoleTooBroadIsWithheld(t *testing.T) {
	testutil.NeedCluster(t)
	// Unmanaged until the bundle role is in place (otherwise oria could
	// generate its own under the name first).
	ext, group := installed(t, oriav1alpha1.RBACModeUnmanaged, "broad", "widgets")
	crd := "widgets." + group
	view := names.ExtensionRole(crd, names.RoleView)
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: view, Labels: olm.OwnerLabels(ext.Name)},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{group}, Resources: []string{"widgets"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}},
		},
	}
	testutil.Create(t, k8sClient, role)
	testutil.SetRBACMode(t, k8sClient, ext.Name, oriav1alpha1.RBACModeFineGrained)
	p := newPolicy(t, ext.Name, oriav1alpha1.AccessView)
	eventuallyTemplateRoles(t, p.Name, names.ExtensionRole(crd, names.RoleViewCRDView))
	markInstance(t, p.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound, "bound", "team-a")
	got := waitReady(t, p.Name, oriav1alpha1.ReasonBundleRoleTooBroad)
	assert.Contains(t, readyMessage(got), view)
	assert.Contains(t, readyMessage(got), "secrets")

	// Narrowed to the extension's own API, it is bound again (the
	// bundle-role watch brings the policy back).
	testutil.Update(t, k8sClient, role, func() { role.Rules = role.Rules[:1] })
	eventuallyTemplateRoles(t, p.Name, view, names.ExtensionRole(crd, names.RoleViewCRDView))
}
