package install

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/localcluster"
)

// certManagerGroup is cert-manager's API group: the install needs none of
// its kinds (oria makes its serving certificate), and the local control
// plane, like a cluster without cert-manager, serves none.
const certManagerGroup = "cert-manager.io"

// TestInstallDryRun sends every object of the rendered install to the API
// server as `kubectl apply --server-side --dry-run=server` would (full
// validation and admission, nothing stored): all of it applies on a
// cluster without cert-manager. The Deployment and PodDisruptionBudget are
// then applied for real: the local control plane's ReplicaSet controller
// creates the Deployment's two pods, which passes them through Pod Security
// admission (the Namespace enforces "restricted"); no pod runs (no
// scheduler or kubelet). The webhook configuration and its Service were
// applied for real by setup, changed for this machine (webhook.go): the
// rendered ones are sent under another name, and the installed webhooks
// compared with the rendered ones.
func TestInstallDryRun(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	var skipped []string
	for _, u := range install {
		if u.GroupVersionKind().Group == certManagerGroup {
			skipped = append(skipped, u.GetKind()+" "+u.GetNamespace()+"/"+u.GetName())
			continue
		}
		obj := u.DeepCopy()
		var err error
		if localCopies[obj.GetKind()+"/"+obj.GetName()] {
			// setup's copy holds that name (an ExternalName Service, the
			// webhook's port; an apply would merge them): create it under
			// another name instead.
			obj.SetName(obj.GetName() + "-dry-run")
			err = k8sClient.Create(ctx, obj, client.DryRunAll)
		} else {
			err = apply(ctx, obj, client.DryRunAll)
		}
		assert.NoError(t, err, "server-side dry-run of %s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
	}
	require.Empty(t, skipped, "config/default needs no cert-manager")

	// The webhook configuration the local control plane runs is the
	// install's, but for its port (and the caBundle oria injects).
	installed := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKey{Name: localcluster.WebhookConfigurationName}, installed))
	rendered := as[admissionregistrationv1.ValidatingWebhookConfiguration](t, find(t, "ValidatingWebhookConfiguration"))
	assert.Equal(t, rendered.Name, installed.Name)
	require.Len(t, installed.Webhooks, len(rendered.Webhooks))
	for i := range rendered.Webhooks {
		want, got := rendered.Webhooks[i].DeepCopy(), installed.Webhooks[i].DeepCopy()
		want.ClientConfig, got.ClientConfig = admissionregistrationv1.WebhookClientConfig{}, admissionregistrationv1.WebhookClientConfig{}
		// Defaulted by the API server on the installed copy.
		want.NamespaceSelector, want.ObjectSelector = got.NamespaceSelector, got.ObjectSelector
		for j := range want.Rules {
			want.Rules[j].Scope = got.Rules[j].Scope
		}
		assert.True(t, equality.Semantic.DeepEqual(want, got), "webhook %s: the local control plane calls the install's webhook\nrendered  %+v\ninstalled %+v", want.Name, want, got)
	}

	// The Deployment for real: Pod Security admits its pods.
	d, _ := deployment(t)
	for _, kind := range []string{"PodDisruptionBudget", "Deployment"} {
		u := find(t, kind).DeepCopy()
		require.NoError(t, apply(ctx, u), "applying the %s", kind)
		t.Cleanup(func() { _ = k8sClient.Delete(ctx, u, client.PropagationPolicy(metav1.DeletePropagationForeground)) })
	}
	// Pod Security is on here: a root pod is refused in that namespace.
	root := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: "root"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	err := k8sClient.Create(ctx, root, client.DryRunAll)
	require.Error(t, err, "the namespace enforces the restricted Pod Security level")
	assert.Contains(t, err.Error(), `violates PodSecurity "restricted`)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		pods := &corev1.PodList{}
		require.NoError(c, k8sClient.List(ctx, pods, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)))
		assert.Len(c, pods.Items, int(*d.Spec.Replicas), "pods created by the ReplicaSet (a refusal by Pod Security shows in its events): %s", replicaSetEvents(ctx, d.Namespace))
		for _, p := range pods.Items {
			assert.Equal(c, d.Spec.Template.Spec.Containers[0].Image, p.Spec.Containers[0].Image)
		}
	}, time.Minute, 200*time.Millisecond)
}

// replicaSetEvents returns the messages of the namespace's ReplicaSet
// events, to explain pods that were not created.
func replicaSetEvents(ctx context.Context, ns string) []string {
	events := &corev1.EventList{}
	if err := k8sClient.List(ctx, events, client.InNamespace(ns)); err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "ReplicaSet" {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}
