package rbacpolicy_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller/rbacpolicy"
	policymodel "github.com/operator-framework/oria/internal/policy"
	"github.com/operator-framework/oria/internal/testutil"
)

func TestCompilesAndMirrorsInstance(t *testing.T) {
	testutil.NeedCluster(t)
	ext, group := installed(t, oriav1alpha1.RBACModeFineGrained, "mirror", "widgets")
	p := newPolicy(t, ext.Name, oriav1alpha1.AccessEdit)

	waitReady(t, p.Name, oriav1alpha1.ReasonProgressing)
	// Bound as soon as the extension controller has generated the roles.
	eventuallyTemplateRoles(t, p.Name, "widgets."+group+"-edit", "widgets."+group+"-view", "widgets."+group+"-view-crdview")
	st := getTemplate(t, p.Name)
	assert.Equal(t, []rbacv1.Subject{{Kind: "Group", APIGroup: rbacv1.GroupName, Name: "developers"}}, st.Spec.BindingTemplate.Subjects)
	si := &oriav1alpha1.ScopeInstance{}
	require.NoError(t, k8sClient.Get(context.Background(), client.ObjectKey{Name: policymodel.ObjectName(p.Name)}, si))
	assert.Equal(t, []string{"team-a"}, si.Spec.Namespaces)
	assert.Equal(t, st.Name, si.Spec.ScopeTemplateName)
	require.True(t, metav1.IsControlledBy(si, p) && metav1.IsControlledBy(st, p), "compiled objects are controlled by the policy")

	markInstance(t, p.Name, metav1.ConditionFalse, oriav1alpha1.ReasonNamespaceNotFound, `namespace "team-a" does not exist`)
	got := waitReady(t, p.Name, oriav1alpha1.ReasonNamespaceNotFound)
	assert.Contains(t, readyMessage(got), `namespace "team-a" does not exist`)

	markInstance(t, p.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound, "bound", "team-a")
	got = waitReady(t, p.Name, oriav1alpha1.ReasonBound)
	assert.Equal(t, []string{"team-a"}, got.Status.BoundNamespaces)
	assert.Equal(t, int32(1), got.Status.BoundNamespaceCount)
	assert.Equal(t, []string{"widgets." + group}, got.Status.APIs)
	assert.Equal(t, oriav1alpha1.ScopeNamespaces, got.Status.Scope)
	assert.Equal(t, st.Name, got.Status.ScopeTemplateName)

	// Quiet: with nothing changed, a reconcile writes nothing (once the
	// manager's cache has caught up with the writes above).
	cachedST, cachedSI := compiled(p.Name)
	testutil.EventuallyCached(t, mgr.GetClient(), k8sClient, p, ext, cachedST, cachedSI)
	counting, writes := testutil.CountingClient(mgr.GetClient())
	d := deps
	d.Client, d.Recorder = counting, events.NewFakeRecorder(10)
	r, err := rbacpolicy.New(d, rbacpolicy.Options{DefaultMode: oriav1alpha1.RBACModeUnmanaged})
	require.NoError(t, err)
	testutil.Quiet(t, r, writes, reconcile.Request{NamespacedName: client.ObjectKey{Name: p.Name}}, 3)

	// Changing the access level recompiles the template.
	testutil.Update(t, k8sClient, p, func() { p.Spec.Access = oriav1alpha1.AccessView })
	eventuallyTemplateRoles(t, p.Name, "widgets."+group+"-view", "widgets."+group+"-view-crdview")

	// Deleting the policy revokes at once: the compiled objects are
	// deleted by the controller (no garbage collector runs here).
	require.NoError(t, k8sClient.Delete(context.Background(), p))
	compiledGone(t, p.Name)
}

func TestExtensionNotFoundThenInstalled(t *testing.T) {
	testutil.NeedCluster(t)
	name := testutil.UniqueName("later")
	p := newPolicy(t, name, oriav1alpha1.AccessView)
	got := waitReady(t, p.Name, oriav1alpha1.ReasonExtensionNotFound)
	assert.Contains(t, readyMessage(got), name)
	compiledGone(t, p.Name)

	ext := testutil.ClusterExtension(name, oriav1alpha1.RBACModeFineGrained)
	testutil.Create(t, k8sClient, ext)
	waitReady(t, p.Name, oriav1alpha1.ReasonAPINotFound)
	addCRD(t, name, testutil.UniqueName("later")+".example.com", "gadgets")
	waitReady(t, p.Name, oriav1alpha1.ReasonProgressing)
	getTemplate(t, p.Name)

	// The extension is uninstalled: the grant goes with it.
	require.NoError(t, k8sClient.Delete(context.Background(), ext))
	waitReady(t, p.Name, oriav1alpha1.ReasonExtensionNotFound)
	compiledGone(t, p.Name)
}

func TestUnmanagedExtensionRevokes(t *testing.T) {
	testutil.NeedCluster(t)
	// No annotation: the controller default (Unmanaged) applies.
	ext, _ := installed(t, "", "unmanaged", "things")
	p := newPolicy(t, ext.Name, oriav1alpha1.AccessView)
	got := waitReady(t, p.Name, oriav1alpha1.ReasonExtensionUnmanaged)
	assert.Contains(t, readyMessage(got), "Unmanaged")
	compiledGone(t, p.Name)

	testutil.SetRBACMode(t, k8sClient, ext.Name, oriav1alpha1.RBACModeFineGrained)
	waitReady(t, p.Name, oriav1alpha1.ReasonProgressing)
	getTemplate(t, p.Name)

	// Legacy also generates the roles, so the policy keeps working.
	testutil.SetRBACMode(t, k8sClient, ext.Name, oriav1alpha1.RBACModeLegacy)
	waitReady(t, p.Name, oriav1alpha1.ReasonProgressing)

	// An invalid mode changes nothing, and the policy says so (not that the
	// extension is unmanaged: its grants stay in force).
	markInstance(t, p.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound, "bound", "team-a")
	waitReady(t, p.Name, oriav1alpha1.ReasonBound)
	testutil.SetRBACMode(t, k8sClient, ext.Name, "Sometimes")
	waitMessage(t, p.Name, oriav1alpha1.ReasonBound, `invalid oria.operatorframework.io/rbac-mode annotation "Sometimes"`)
	getTemplate(t, p.Name)

	// A change of the policy meanwhile is narrowed: nothing it adds is
	// granted until the annotation is fixed.
	testutil.Update(t, k8sClient, p, func() { p.Spec.Namespaces = []string{"team-a", "team-b"} })
	got = waitReady(t, p.Name, oriav1alpha1.ReasonInvalidMode)
	assert.Contains(t, readyMessage(got), `invalid oria.operatorframework.io/rbac-mode annotation "Sometimes"`)
	assert.Contains(t, readyMessage(got), "the grant in force stays, in 1 namespace")
	_, si := compiled(p.Name)
	si = testutil.EventuallyGet(t, k8sClient, si)
	assert.Equal(t, []string{"team-a"}, si.Spec.Namespaces)

	testutil.SetRBACMode(t, k8sClient, ext.Name, oriav1alpha1.RBACModeUnmanaged)
	waitReady(t, p.Name, oriav1alpha1.ReasonExtensionUnmanaged)
	compiledGone(t, p.Name)
}

func TestUpgradeAddsAndRemovesAPIs(t *testing.T) {
	testutil.NeedCluster(t)
	ext, group := installed(t, oriav1alpha1.RBACModeFineGrained, "upgrade", "alphas")
	p := newPolicy(t, ext.Name, oriav1alpha1.AccessAdmin)
	waitReady(t, p.Name, oriav1alpha1.ReasonProgressing)
	eventuallyTemplateRoles(t, p.Name, "alphas."+group+"-admin", "alphas."+group+"-view-crdview")

	// An upgrade adds an API: the policy covers it without being edited.
	crd := testutil.CRD(group, "betas", "Beta", ext.Name)
	require.NoError(t, k8sClient.Create(context.Background(), crd))
	eventuallyTemplateRoles(t, p.Name,
		"alphas."+group+"-admin", "alphas."+group+"-view-crdview",
		"betas."+group+"-admin", "betas."+group+"-view-crdview",
	)

	// The next upgrade drops it again.
	require.NoError(t, k8sClient.Delete(context.Background(), crd))
	eventuallyTemplateRoles(t, p.Name, "alphas."+group+"-admin", "alphas."+group+"-view-crdview")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &oriav1alpha1.RBACPolicy{}
		require.NoError(c, k8sClient.Get(context.Background(), client.ObjectKeyFromObject(p), got))
		assert.Equal(c, []string{"alphas." + group}, got.Status.APIs)
	}, testutil.Timeout, testutil.Interval)
}

func TestNarrowedToMissingAPI(t *testing.T) {
	testutil.NeedCluster(t)
	ext, group := installed(t, oriav1alpha1.RBACModeFineGrained, "narrow", "ones")
	p := newPolicy(t, ext.Name, oriav1alpha1.AccessView, func(s *oriav1alpha1.RBACPolicySpec) {
		s.APIs = []oriav1alpha1.APIRef{{Group: group, Resource: "twos"}}
	})
	got := waitReady(t, p.Name, oriav1alpha1.ReasonAPINotFound)
	assert.Contains(t, readyMessage(got), "twos."+group)
	compiledGone(t, p.Name)

	// Partly available: granted for what exists, still reported.
	testutil.Update(t, k8sClient, p, func() {
		p.Spec.APIs = append(p.Spec.APIs, oriav1alpha1.APIRef{Group: group, Resource: "ones"})
	})
	getTemplate(t, p.Name)
	markInstance(t, p.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound, "bound", "team-a")
	got = waitReady(t, p.Name, oriav1alpha1.ReasonAPINotFound)
	assert.Contains(t, readyMessage(got), "granted for ones."+group)
	assert.Contains(t, readyMessage(got), "twos."+group)
}
