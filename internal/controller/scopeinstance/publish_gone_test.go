package scopeinstance_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/publish"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestPublicationNeverRecreatesAConfigMap: oria reads a ConfigMap it
// publishes into from its cache, and the ConfigMap is deleted before oria
// writes (the garbage collector takes the one oria created with its deleted
// instance). A server-side apply creates what does not exist, so the
// withdrawal, and the write of a key, name the UID oria read: the write
// fails, nothing is created, and the withdrawal counts the ConfigMap as
// gone. Before, an empty ConfigMap without an ownerReference took the
// deleted one's place, for good (an e2e run caught it: a ConfigMap oria
// created outlived its instance).
func TestPublicationNeverRecreatesAConfigMap(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	op := namespace(t, "op", nil)
	instance := testutil.UniqueName("si")
	ref := oriav1alpha1.ConfigMapKeyReference{Namespace: op, Name: "scope"}
	w := &engine.Writer{Client: k8sClient, Revoker: k8sClient, Reader: k8sClient, Cache: k8sClient, Memo: engine.NewMemo(), Engine: engine.New(engine.Unobserved)}

	require.NoError(t, k8sClient.Apply(ctx, publish.ConfigMap(instance, ref, op, ""), client.FieldOwner(publish.FieldOwner(instance))))
	read := get(t, ref.Name, op, &corev1.ConfigMap{})
	require.NoError(t, k8sClient.Delete(ctx, read))
	absent := func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(read), &corev1.ConfigMap{}))
	}
	require.True(t, absent())

	gone, err := engine.Withdraw(ctx, w, publish.Withdrawal(op, ref.Name, read.UID), publish.FieldOwner(instance))
	require.NoError(t, err)
	assert.True(t, gone, "the ConfigMap read is gone")
	assert.True(t, absent(), "the withdrawal created the ConfigMap again")

	conflict, err := engine.ApplyFields(ctx, w, publish.ConfigMap(instance, ref, op, read.UID), publish.FieldOwner(instance))
	assert.False(t, conflict, "a deleted ConfigMap is no conflict over a key")
	assert.True(t, engine.Gone(err), "the write of a key into a deleted ConfigMap: %v", err)
	assert.True(t, absent(), "the write of a key created the ConfigMap again")

	// Another ConfigMap of the same name since: the one read is gone all
	// the same, and the new one is left alone.
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: op, Name: ref.Name}, Data: map[string]string{"theirs": "x"}}
	require.NoError(t, k8sClient.Create(ctx, other))
	gone, err = engine.Withdraw(ctx, w, publish.Withdrawal(op, ref.Name, read.UID), publish.FieldOwner(instance))
	require.NoError(t, err)
	assert.True(t, gone, "the ConfigMap read is gone, replaced by another")
	_, err = engine.ApplyFields(ctx, w, publish.ConfigMap(instance, ref, op, read.UID), publish.FieldOwner(instance))
	assert.True(t, engine.Gone(err), "the write of a key into a replaced ConfigMap: %v", err)
	after := get(t, ref.Name, op, &corev1.ConfigMap{})
	assert.Equal(t, other.UID, after.UID)
	assert.Equal(t, other.Data, after.Data)
	assert.NotContains(t, after.Annotations, publish.AnnotationKey(instance))

	// The ConfigMap as read, still there: the withdrawal takes the
	// instance's fields away, and the key is written. The key is read as
	// the ConfigMap was right after the write (a list at exactly the
	// write's resourceVersion): the controller, which runs in this suite,
	// withdraws the key of an instance that does not exist as soon as its
	// watch shows the ConfigMap, so a read now may not see it.
	written := publish.ConfigMap(instance, ref, op, other.UID)
	_, err = engine.ApplyFields(ctx, w, written, publish.FieldOwner(instance))
	require.NoError(t, err)
	require.NotNil(t, written.ResourceVersion, "the apply's answer")
	var then corev1.ConfigMapList
	require.NoError(t, k8sClient.List(ctx, &then, client.InNamespace(op), &client.ListOptions{Raw: &metav1.ListOptions{
		ResourceVersion: *written.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact}}))
	var key string
	for _, cm := range then.Items {
		if cm.Name == ref.Name {
			key = cm.Data[ref.KeyOrDefault()]
		}
	}
	assert.Equal(t, op, key, "the key, right after the write")
	gone, err = engine.Withdraw(ctx, w, publish.Withdrawal(op, ref.Name, other.UID), publish.FieldOwner(instance))
	require.NoError(t, err)
	assert.False(t, gone)
	assert.Equal(t, other.Data, get(t, ref.Name, op, &corev1.ConfigMap{}).Data)
}

// TestRestartNamesTheWorkloadListed: the restart of a workload names the
// UID of the one the publisher listed. A Deployment replaced by another of
// its name since (which the restart labels may not select) is left alone
// (engine.Gone): no restart annotation on the new one; the one listed,
// still there, is restarted.
func TestRestartNamesTheWorkloadListed(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	op := namespace(t, "op", nil)
	instance := testutil.UniqueName("si")
	w := &engine.Writer{Client: k8sClient, Revoker: k8sClient, Reader: k8sClient, Cache: k8sClient, Memo: engine.NewMemo(), Engine: engine.New(engine.Unobserved)}
	deployment := func(labels map[string]string) *appsv1.Deployment {
		sel := map[string]string{"app": "x"}
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: op, Name: "workload", Labels: labels},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.com/x"}}}}}}
	}
	listed := deployment(map[string]string{"restart": "me"})
	require.NoError(t, k8sClient.Create(ctx, listed))
	restart := func(uid types.UID) error {
		return engine.ApplyForced(ctx, w, publish.Restart(publish.KindDeployment, op, "workload", uid, "h1"), publish.FieldOwner(instance))
	}
	annotation := func() string {
		return get(t, "workload", op, &appsv1.Deployment{}).Spec.Template.Annotations[oriav1alpha1.AnnotationRestartedFor]
	}

	require.NoError(t, k8sClient.Delete(ctx, listed))
	other := deployment(nil) // not labelled for a restart
	require.NoError(t, k8sClient.Create(ctx, other))
	err := restart(listed.UID)
	assert.True(t, engine.Gone(err), "the restart of a replaced Deployment: %v", err)
	assert.Empty(t, annotation(), "the Deployment that took the listed one's name was restarted")

	require.NoError(t, restart(other.UID))
	assert.Equal(t, "h1", annotation(), "the Deployment listed, still there, is restarted")
}
