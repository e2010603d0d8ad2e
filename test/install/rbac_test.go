package install

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestInstalledOria runs one oria as the install's Deployment runs it, as
// its ServiceAccount with the installed RBAC alone, and has every
// controller and the escalation guard do their work: Legacy roles, a
// FineGrained RBACPolicy, a ScopeInstance that publishes its namespaces and
// restarts a workload, one under a ceiling ServiceAccount, the
// guard refusing a user and admitting an admin, and the reverts. Any
// "forbidden" in oria's log fails it.
func TestInstalledOria(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	p := startAsDeployment(t, serviceAccountKubeconfig(t), replica{name: "single", webhookPort: webhookPort})
	t.Cleanup(func() {
		if t.Failed() {
			tail(t, p.LogPath)
		}
	})
	wait := func(obj client.Object, reason string) {
		t.Helper()
		testutil.EventuallyCondition(t, k8sClient, obj, testutil.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionTrue, Reason: reason})
	}

	// The extension controller, Legacy: roles aggregated into view/edit/admin.
	legacy := testutil.UniqueName("legacy")
	testutil.Create(t, k8sClient, testutil.ClusterExtension(legacy, oriav1alpha1.RBACModeLegacy))
	crd := testutil.CRD(legacy+".example.com", "widgets", "Widget", legacy)
	testutil.Create(t, k8sClient, crd)
	testutil.EventuallyCondition(t, k8sClient, testutil.ClusterExtension(legacy, ""),
		testutil.Condition{Type: oriav1alpha1.TypeRBACManaged, Status: metav1.ConditionTrue, Reason: oriav1alpha1.ReasonLegacy})
	view := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: crd.Name + "-view"}}
	eventually(t, func(c *assert.CollectT) {
		got := &rbacv1.ClusterRole{}
		require.NoError(c, k8sClient.Get(ctx, client.ObjectKeyFromObject(view), got))
		assert.Equal(c, "true", got.Labels["rbac.authorization.k8s.io/aggregate-to-view"])
	})

	// FineGrained: an RBACPolicy compiled into a ScopeTemplate and a
	// ScopeInstance, bound in one namespace.
	fine := testutil.UniqueName("fine")
	testutil.Create(t, k8sClient, testutil.ClusterExtension(fine, oriav1alpha1.RBACModeFineGrained))
	fineCRD := testutil.CRD(fine+".example.com", "gizmos", "Gizmo", fine)
	testutil.Create(t, k8sClient, fineCRD)
	teamA := testutil.CreateNamespace(t, k8sClient, "team-a", nil)
	devs := testutil.UniqueName("developers")
	policy := &oriav1alpha1.RBACPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: fine},
		Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: fine, Access: oriav1alpha1.AccessView, Namespaces: []string{teamA},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: devs}}},
	}
	testutil.Create(t, k8sClient, policy)
	wait(policy, oriav1alpha1.ReasonBound)
	dev := testutil.Access{User: "dana", Groups: []string{devs}, Verb: "list", Group: fine + ".example.com", Resource: "gizmos", Namespace: teamA}
	eventually(t, func(c *assert.CollectT) { assert.True(c, allowed(c, dev), "%s", dev) })

	// The binding layer with a publication: the bound namespaces go into a
	// ConfigMap and the labelled Deployment is restarted.
	watched := testutil.UniqueName("watched")
	sys := testutil.CreateNamespace(t, k8sClient, "gadget-system", nil)
	ns1 := testutil.CreateNamespace(t, k8sClient, "gadgets", map[string]string{watched: "true"})
	restart := map[string]string{"oria.operatorframework.io/restart": watched}
	workload := gadgetDeployment(sys, restart)
	testutil.Create(t, k8sClient, workload)
	tmpl := testutil.ScopeTemplate(watched, []oriav1alpha1.ClusterRoleTemplate{{Name: watched, Rules: testutil.PodReaderRules()}},
		testutil.ServiceAccount("gadget-operator", sys))
	testutil.Create(t, k8sClient, tmpl)
	si := &oriav1alpha1.ScopeInstance{
		ObjectMeta: metav1.ObjectMeta{Name: watched},
		Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: watched,
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{watched: "true"}},
			Publication: &oriav1alpha1.Publication{ConfigMap: oriav1alpha1.ConfigMapKeyReference{Namespace: sys, Name: "scope", Key: "namespaces"},
				RestartLabels: restart}},
	}
	testutil.Create(t, k8sClient, si)
	wait(si, oriav1alpha1.ReasonBound)
	eventually(t, func(c *assert.CollectT) {
		cm := &corev1.ConfigMap{}
		require.NoError(c, k8sClient.Get(ctx, client.ObjectKey{Namespace: sys, Name: "scope"}, cm))
		assert.Contains(c, cm.Data["namespaces"], ns1)
		d := &appsv1.Deployment{}
		require.NoError(c, k8sClient.Get(ctx, client.ObjectKeyFromObject(workload), d))
		assert.NotEmpty(c, d.Spec.Template.Annotations[oriav1alpha1.AnnotationRestartedFor], "the workload was restarted")
	})

	// A ceiling: bindings written as a ServiceAccount that holds
	// what it passes on.
	ceilingNS := testutil.CreateNamespace(t, k8sClient, "ceiling", nil)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ceilingNS, Name: "ceiling"}}
	testutil.Create(t, k8sClient, sa)
	ceilingRole := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ceilingNS, Name: "ceiling"}, Rules: append(testutil.PodReaderRules(),
		rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: []string{"get", "create", "update", "patch", "delete"}})}
	testutil.Create(t, k8sClient, ceilingRole)
	testutil.Create(t, k8sClient, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ceilingNS, Name: "ceiling"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "ceiling"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ceilingNS, Name: "ceiling"}}})
	capped := testutil.UniqueName("capped")
	testutil.Create(t, k8sClient, testutil.ScopeTemplate(capped, []oriav1alpha1.ClusterRoleTemplate{{Name: capped, Rules: testutil.PodReaderRules()}},
		testutil.ServiceAccount("operator", ceilingNS)))
	asi := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: capped}, Spec: oriav1alpha1.ScopeInstanceSpec{
		ScopeTemplateName: capped, Namespaces: []string{ceilingNS},
		ServiceAccount: &oriav1alpha1.ServiceAccountReference{Namespace: ceilingNS, Name: "ceiling"}}}
	testutil.Create(t, k8sClient, asi)
	wait(asi, oriav1alpha1.ReasonBound)

	// The guard, with oria's RBAC: a user who may write ScopeTemplates but
	// holds nothing is refused a role of every permission; the admin is not.
	mallory := testutil.UniqueName("mallory")
	writer := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: mallory}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{oriav1alpha1.GroupVersion.Group}, Resources: []string{"scopetemplates"}, Verbs: []string{"create"}}}}
	testutil.Create(t, k8sClient, writer)
	testutil.Create(t, k8sClient, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: mallory},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: mallory},
		Subjects: []rbacv1.Subject{testutil.User(mallory)}})
	cfg, err := cluster.AddUser(mallory)
	require.NoError(t, err)
	asMallory, err := client.New(cfg, client.Options{Scheme: k8sClient.Scheme()})
	require.NoError(t, err)
	all := []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}
	grab := testutil.ScopeTemplate(mallory, []oriav1alpha1.ClusterRoleTemplate{{Name: mallory + "-all", Rules: all}}, testutil.User(mallory))
	eventually(t, func(c *assert.CollectT) { // mallory's rights reach the authorizer's cache
		err := asMallory.Create(ctx, grab.DeepCopy())
		require.Error(c, err, "the guard refuses what mallory could not create herself")
		assert.Contains(c, err.Error(), `admission webhook "escalation-guard.oria.operatorframework.io" denied the request`)
		assert.Contains(c, err.Error(), `needs "escalate"`)
	})
	testutil.Create(t, k8sClient, grab)
	judged(t, "installed") // a delegated user's writes, judged through oria's own certificate

	// Reverting: deleting the policy and switching the Legacy extension to
	// Unmanaged remove what oria created for them.
	require.NoError(t, k8sClient.Delete(ctx, policy))
	eventually(t, func(c *assert.CollectT) { assert.False(c, allowed(c, dev), "%s after the policy's deletion", dev) })
	testutil.SetRBACMode(t, k8sClient, legacy, oriav1alpha1.RBACModeUnmanaged)
	testutil.EventuallyGone(t, k8sClient, view)

	requireNoForbidden(t, p.LogPath)
}

// gadgetDeployment is a workload with the publication's restart labels.
func gadgetDeployment(ns string, restart map[string]string) *appsv1.Deployment {
	labels := map[string]string{"app.kubernetes.io/name": "gadget-operator"}
	for k, v := range restart {
		labels[k] = v
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gadget-operator", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "gadget-operator"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "gadget-operator"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "example.com/gadget:v1"}}},
			},
		},
	}
}

func eventually(t *testing.T, check func(c *assert.CollectT)) {
	t.Helper()
	require.EventuallyWithT(t, check, testutil.Timeout, testutil.Interval)
}

func allowed(c require.TestingT, a testutil.Access) bool {
	ok, err := testutil.Allowed(context.Background(), k8sClient, a)
	require.NoError(c, err)
	return ok
}
