package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/publish"
	"github.com/operator-framework/oria/internal/testutil"
)

// patchOnlyConfigMaps lets user get and patch, but not create or delete,
// the ConfigMaps of namespace.
func patchOnlyConfigMaps(t *testing.T, user, namespace string) {
	t.Helper()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "configmaps-patch", Namespace: namespace},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "patch"}}},
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name + "-" + user, Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{testutil.User(user)},
	}
	testutil.Create(t, k8sClient, role)
	testutil.Create(t, k8sClient, rb)
	cm := func(verb string) testutil.Access {
		return testutil.Access{User: user, Verb: verb, Resource: "configmaps", Namespace: namespace}
	}
	eventuallyAccess(t, true, cm("patch"))
	eventuallyAccess(t, false, cm("delete"), cm("create"))
}

// TestPublicationForgedMetadata (issue 29, case 7): D, who may patch but
// not delete the ConfigMaps of a namespace, dresses an admin's ConfigMap up
// as one oria published into for a ScopeInstance that does not exist:
// oria's label, the annotation naming the instance, and every field given
// to oria's publication field manager (a server-side apply under that
// manager's name, then managedFields rewritten). The ConfigMap is then
// exactly what oria's old rule deleted: nothing left after the withdrawal,
// no manager but oria's. oria withdraws what that manager holds (all D
// handed to it, which D could remove with patch anyway), and deletes
// nothing: it deletes only ConfigMaps it created, known by the
// ownerReference it set when it created them. The positive control: a
// ConfigMap oria created for D's own instance goes when the instance is
// deleted (the garbage collector, through that ownerReference), unless D
// wrote a key of her own into it.
func TestPublicationForgedMetadata(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	user, own, as := sequenceUser(t, "forged-cm")
	victim := createNamespace(t, "victim", nil)
	patchOnlyConfigMaps(t, user, victim)
	precious := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: victim},
		Data:       map[string]string{"config": "important"},
	}
	require.NoError(t, k8sClient.Create(ctx, precious))

	// D forges, in two writes as oria's publication field manager for an
	// instance that does not exist: a server-side apply of the annotation
	// naming it and of the data (taking the data over), then a patch that
	// adds oria's label and leaves that apply the only entry of
	// managedFields: no other manager holds anything, and nothing is left
	// once oria withdraws what that manager holds.
	ghost := testutil.UniqueName("ghost")
	manager := publish.FieldOwner(ghost)
	forged := corev1ac.ConfigMap(precious.Name, victim).
		WithAnnotations(map[string]string{publish.AnnotationKey(ghost): oriav1alpha1.DefaultPublicationKey}).
		WithData(precious.Data)
	require.NoError(t, as.Apply(ctx, forged, client.FieldOwner(manager), client.ForceOwnership))
	cm := &corev1.ConfigMap{}
	require.NoError(t, as.Get(ctx, client.ObjectKeyFromObject(precious), cm))
	applied := slices.DeleteFunc(cm.ManagedFields, func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager != manager || e.Operation != metav1.ManagedFieldsOperationApply
	})
	require.Len(t, applied, 1)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels":        map[string]string{oriav1alpha1.LabelPublished: "true"},
		"managedFields": applied,
	}})
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, as.Patch(ctx, cm, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(manager)))
	for _, e := range cm.ManagedFields {
		assert.Equal(t, manager, e.Manager, "only oria's publication field manager holds fields of the forged ConfigMap")
	}

	// oria reacts: it withdraws what the ghost's manager applied (the
	// annotation and the data go; nobody else removes them), in the step in
	// which it used to delete the ConfigMap.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cm := &corev1.ConfigMap{}
		err := k8sClient.Get(ctx, client.ObjectKeyFromObject(precious), cm)
		if apierrors.IsNotFound(err) || !assert.NoError(c, err) {
			return // deleted: the assertion below fails
		}
		assert.NotContains(c, cm.Annotations, publish.AnnotationKey(ghost))
		assert.Empty(c, cm.Data)
	}, testutil.Timeout, testutil.Interval)
	t.Logf("oria withdrew the ghost's fields %s after the forgery", time.Since(start).Round(time.Millisecond))
	time.Sleep(3 * time.Second)
	cm = &corev1.ConfigMap{}
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKeyFromObject(precious), cm), "oria deleted a ConfigMap it did not create")
	assert.Equal(t, precious.UID, cm.UID, "the same ConfigMap")
	assert.Empty(t, cm.OwnerReferences)
	eventuallyAccess(t, false, testutil.Access{User: user, Verb: "delete", Resource: "configmaps", Namespace: victim})

	// Positive control: D's own instance publishes into D's namespace; oria
	// creates the ConfigMap with an ownerReference to it, and the
	// ConfigMap goes with the instance.
	tmpl := basicUserTemplate(t, as, testutil.UniqueName("forged-cm"), user)
	scope, si := ownInstance(t, as, tmpl.Name, own, "scope")
	start = time.Now()
	require.NoError(t, k8sClient.Delete(ctx, si))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.True(c, apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(scope), &corev1.ConfigMap{})))
	}, gcTimeout, testutil.Interval)
	t.Logf("the ConfigMap oria created went %s after its instance was deleted", time.Since(start).Round(time.Millisecond))

	// One in which D wrote a key of her own loses the ownerReference, and
	// outlives its instance with her key.
	shared, si := ownInstance(t, as, tmpl.Name, own, "shared")
	require.NoError(t, as.Patch(ctx, shared, client.RawPatch(types.MergePatchType, []byte(`{"data":{"mine":"x"}}`))))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cm := &corev1.ConfigMap{}
		if assert.NoError(c, k8sClient.Get(ctx, client.ObjectKeyFromObject(shared), cm)) {
			assert.Empty(c, cm.OwnerReferences)
		}
	}, testutil.Timeout, testutil.Interval)
	require.NoError(t, k8sClient.Delete(ctx, si))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.True(c, apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(si), si)))
		cm := &corev1.ConfigMap{}
		if assert.NoError(c, k8sClient.Get(ctx, client.ObjectKeyFromObject(shared), cm)) {
			assert.Equal(c, map[string]string{"mine": "x"}, cm.Data, "oria's key withdrawn, hers kept")
		}
	}, testutil.Timeout, testutil.Interval)
	time.Sleep(3 * time.Second) // the garbage collector acts within a second
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKeyFromObject(shared), shared), "deleted with its instance")
	assert.Equal(t, map[string]string{"mine": "x"}, shared.Data)
}

// ownInstance creates, as the user, an instance of template publishing into
// ConfigMap name of the user's namespace own, and waits until oria created
// the ConfigMap with an ownerReference to the instance.
func ownInstance(t *testing.T, as client.Client, template, own, name string) (*corev1.ConfigMap, *oriav1alpha1.ScopeInstance) {
	t.Helper()
	si := scopeInstance(testutil.UniqueName("forged-cm"), template, own)
	si.Spec.Publication = &oriav1alpha1.Publication{ConfigMap: oriav1alpha1.ConfigMapKeyReference{Namespace: own, Name: name}}
	require.NoError(t, as.Create(context.Background(), si))
	cleanup(t, si)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: own}}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		if !assert.NoError(c, k8sClient.Get(context.Background(), client.ObjectKeyFromObject(cm), cm)) {
			return
		}
		assert.Equal(c, own, cm.Data[oriav1alpha1.DefaultPublicationKey])
		if assert.Len(c, cm.OwnerReferences, 1) {
			assert.Equal(c, si.UID, cm.OwnerReferences[0].UID)
			assert.Nil(c, cm.OwnerReferences[0].Controller)
			assert.Nil(c, cm.OwnerReferences[0].BlockOwnerDeletion)
		}
	}, testutil.Timeout, testutil.Interval)
	return cm, si
}
