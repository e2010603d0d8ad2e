package install

import (
	"context"
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/operator-framework/oria/test/localcluster"
)

// webhookHost is where every replica's guard listens, and where the API
// server calls it (through the ExternalName Service).
const webhookHost = "127.0.0.1"

var (
	// webhookPort is the port the install's webhook configuration calls
	// here (instead of the Service's 443): a single replica listens on it,
	// or the proxy that stands for the Service in front of two.
	webhookPort int
	// localCopies are the install's objects setup applied changed for this
	// machine (kind/name): TestInstallDryRun sends the rendered ones under
	// another name.
	localCopies = map[string]bool{}
)

// installWebhook applies the install's ValidatingWebhookConfiguration and
// its Service for real, changed only where a process on this machine
// differs from pods behind a Service: the Service is an ExternalName for
// 127.0.0.1 (the API server resolves a webhook's Service of that type to
// its external name, no pod network needed, and still checks the
// certificate for <service>.<namespace>.svc), and the webhook calls
// webhookPort, a free port, instead of 443. The caBundle is left to oria.
func installWebhook(ctx context.Context) error {
	ports, err := localcluster.FreePorts(1)
	if err != nil {
		return err
	}
	webhookPort = ports[0]
	var hook, svc *unstructured.Unstructured
	for _, u := range install {
		if u.GetKind() == "ValidatingWebhookConfiguration" {
			hook = u.DeepCopy()
		}
	}
	if hook == nil {
		return errors.New("the install has no ValidatingWebhookConfiguration")
	}
	typed := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(hook.Object, typed); err != nil {
		return err
	}
	if len(typed.Webhooks) == 0 || typed.Webhooks[0].ClientConfig.Service == nil {
		return errors.New("the install's webhook calls no Service")
	}
	ref := typed.Webhooks[0].ClientConfig.Service
	for _, u := range install {
		if u.GetKind() == "Service" && u.GetNamespace() == ref.Namespace && u.GetName() == ref.Name {
			svc = u
		}
	}
	if svc == nil {
		return fmt.Errorf("the install has no Service %s/%s for its webhook", ref.Namespace, ref.Name)
	}
	local, err := toUnstructured(&corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: svc.GetNamespace(), Name: svc.GetName(), Labels: svc.GetLabels()},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: webhookHost},
	})
	if err != nil {
		return err
	}
	if err := apply(ctx, local); err != nil {
		return fmt.Errorf("applying the webhook's Service as an ExternalName: %w", err)
	}
	for i := range typed.Webhooks {
		typed.Webhooks[i].ClientConfig.Service.Port = ptr.To(int32(webhookPort))
	}
	typed.TypeMeta = metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingWebhookConfiguration"}
	if hook, err = toUnstructured(typed); err != nil {
		return err
	}
	if err := apply(ctx, hook); err != nil {
		return fmt.Errorf("applying the webhook configuration: %w", err)
	}
	localCopies["Service/"+svc.GetName()] = true
	localCopies["ValidatingWebhookConfiguration/"+hook.GetName()] = true
	return nil
}

func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	return u, nil
}
