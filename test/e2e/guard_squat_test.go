package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriaac "github.com/operator-framework/oria/api/applyconfiguration/api/v1alpha1"
	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// exclusive is the schema's message for an object with both namespaces
// and namespaceSelector.
const exclusive = "namespaces and namespaceSelector are mutually exclusive"

// invalid asserts that err is the API server's schema refusal (422
// Invalid, before any admission webhook) and that its message contains
// every part.
func invalid(t *testing.T, err error, parts ...string) {
	t.Helper()
	require.Error(t, err, "the API server must refuse")
	assert.True(t, apierrors.IsInvalid(err), "a schema refusal is 422 Invalid: %v", err)
	t.Log(err)
	for _, p := range parts {
		assert.Contains(t, err.Error(), p)
	}
}

// TestGuardSquattedName (issue 29, case 4): the delegated user D creates
// the ScopeInstance an admin will apply later, with a harmless template and
// namespaces [victim]. The admin's apply of {their template, a selector of
// env=dev}, by a forced server-side apply (a GitOps tool with
// --force-conflicts) or as kubectl apply sends it (a JSON merge patch),
// would keep D's namespaces beside the selector and bind the admin's
// template in victim. namespaces and namespaceSelector are mutually
// exclusive in the schema: each apply fails, naming the field, and D gains
// nothing. Once the admin deletes the squatted object, their apply works.
func TestGuardSquattedName(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	user, _, as := sequenceUser(t, "squatter")
	victim := createNamespace(t, "victim", nil)
	dev := createNamespace(t, "dev", map[string]string{"env": "dev"})
	view := func(ns string) testutil.Access {
		return testutil.Access{User: user, Verb: "list", Resource: "configmaps", Namespace: ns}
	}

	// The admin's template: view for D (wherever an instance binds it).
	tplDev := testutil.ScopeTemplate(testutil.UniqueName("tpl-dev"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User(user))
	require.NoError(t, k8sClient.Create(ctx, tplDev))
	cleanup(t, tplDev)

	// D squats the name the admin will apply.
	harmless := basicUserTemplate(t, as, testutil.UniqueName("harmless"), user)
	name := testutil.UniqueName("dev-view")
	squat := scopeInstance(name, harmless.Name, victim)
	require.NoError(t, as.Create(ctx, squat), "binding system:basic-user in victim is harmless")
	cleanup(t, squat)
	waitScopeInstanceReady(t, name)

	selector := map[string]string{"env": "dev"}
	// (a) A forced server-side apply by the admin's GitOps tool.
	ac := oriaac.ScopeInstance(name).WithSpec(oriaac.ScopeInstanceSpec().
		WithScopeTemplateName(tplDev.Name).
		WithNamespaceSelector(metav1ac.LabelSelector().WithMatchLabels(selector)))
	invalid(t, k8sClient.Apply(ctx, ac, client.FieldOwner("gitops"), client.ForceOwnership),
		"spec.namespaceSelector", exclusive)

	// (b) kubectl apply: on an object without its last-applied annotation,
	// a JSON merge patch of the applied fields (and the annotation).
	applied := map[string]any{
		"apiVersion": oriav1alpha1.GroupVersion.String(), "kind": "ScopeInstance",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"scopeTemplateName": tplDev.Name, "namespaceSelector": map[string]any{"matchLabels": selector}},
	}
	last, err := json.Marshal(applied)
	require.NoError(t, err)
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{"kubectl.kubernetes.io/last-applied-configuration": string(last)}},
		"spec":     applied["spec"],
	})
	require.NoError(t, err)
	invalid(t, k8sClient.Patch(ctx, &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: name}},
		client.RawPatch(types.MergePatchType, patch), client.FieldOwner("kubectl-client-side-apply")),
		"spec.namespaceSelector", exclusive)

	// Nothing of the admin's reached the object, and D has no view
	// anywhere.
	got := &oriav1alpha1.ScopeInstance{}
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKey{Name: name}, got))
	assert.Equal(t, harmless.Name, got.Spec.ScopeTemplateName)
	assert.Nil(t, got.Spec.NamespaceSelector)
	assert.Equal(t, []string{victim}, got.Spec.Namespaces)
	eventuallyAccess(t, false, view(victim), view(dev))

	// The admin removes the squatted object and applies again: their grant,
	// exactly, and nothing in victim.
	require.NoError(t, k8sClient.Delete(ctx, squat))
	testutil.EventuallyGone(t, k8sClient, squat)
	start := time.Now()
	require.NoError(t, k8sClient.Apply(ctx, ac, client.FieldOwner("gitops"), client.ForceOwnership))
	eventuallyAccess(t, true, view(dev))
	t.Logf("the admin's grant took effect after %s", time.Since(start).Round(time.Millisecond))
	eventuallyAccess(t, false, view(victim))
}

// TestOneOfFieldsAreExclusive: an RBACPolicy with both namespaces and a
// namespaceSelector is refused by the schema, for an admin too, naming the
// fields; so is a ScopeInstance, whoever writes it.
func TestOneOfFieldsAreExclusive(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	both := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}
	p := &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("both")},
		Spec: oriav1alpha1.RBACPolicySpec{
			ExtensionName: "argocd", Access: oriav1alpha1.AccessView,
			Subjects:   []rbacv1.Subject{testutil.User("alice")},
			Namespaces: []string{"team-a"}, NamespaceSelector: both,
		}}
	invalid(t, k8sClient.Create(ctx, p), "spec.namespaceSelector", exclusive)
	si := scopeInstance(testutil.UniqueName("both"), "any", "team-a")
	si.Spec.NamespaceSelector = both
	invalid(t, k8sClient.Create(ctx, si), "spec.namespaceSelector", exclusive)
}
