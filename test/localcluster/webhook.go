package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// WebhookConfigurationName is the name of the ValidatingWebhookConfiguration
// holding the escalation guard (locally and in config/default).
const WebhookConfigurationName = "oria-escalation-guard"

// Webhook is where the local control plane calls oria's escalation guard.
type Webhook struct {
	// Host and Port are the address the API server calls.
	Host string
	Port int
	// CertDir holds tls.crt and tls.key, the serving certificate for Host.
	CertDir string
}

// webhookConfigurations reads the generated webhook configuration
// (config/webhook/manifests.yaml) and names it as config/default does.
func webhookConfigurations() ([]*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	path := filepath.Join(RepoRoot(), "config", "webhook", "manifests.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the webhook configuration: %w", err)
	}
	hook := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := yaml.Unmarshal(b, hook); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	hook.Name = WebhookConfigurationName
	// envtest joins host and path with a slash of its own: without this
	// the URL would read https://127.0.0.1:port//validate-...
	for i := range hook.Webhooks {
		if s := hook.Webhooks[i].ClientConfig.Service; s != nil && s.Path != nil {
			s.Path = ptr.To(strings.TrimPrefix(*s.Path, "/"))
		}
	}
	return []*admissionregistrationv1.ValidatingWebhookConfiguration{hook}, nil
}

// keepServingCert copies the serving certificate envtest generated (in a
// directory of its own, removed when it stops) into the state directory,
// where oria reads it.
func (c *Cluster) keepServingCert() error {
	w := c.env.WebhookInstallOptions
	dir := filepath.Join(c.Dir, "webhook")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, f := range []string{"tls.crt", "tls.key"} {
		b, err := os.ReadFile(filepath.Join(w.LocalServingCertDir, f))
		if err != nil {
			return fmt.Errorf("reading the webhook serving certificate: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			return err
		}
	}
	c.Webhook = &Webhook{Host: w.LocalServingHost, Port: w.LocalServingPort, CertDir: dir}
	return nil
}

// OriaFlags are the flags oria needs to serve this cluster's escalation
// guard; without one installed, the flag that turns the guard off.
func (c *Cluster) OriaFlags() []string {
	if c.Webhook == nil {
		return []string{"--webhook-port=0"}
	}
	return []string{
		"--webhook-host=" + c.Webhook.Host,
		"--webhook-port=" + strconv.Itoa(c.Webhook.Port),
		"--webhook-cert-dir=" + c.Webhook.CertDir,
	}
}

// StatusPolicyObjects reads the guard's ValidatingAdmissionPolicy and its
// binding (config/webhook/status-policy.yaml: only oria writes the status of
// oria's objects).
func StatusPolicyObjects() ([]*unstructured.Unstructured, error) {
	path := filepath.Join(RepoRoot(), "config", "webhook", "status-policy.yaml")
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the status policy: %w", err)
	}
	defer f.Close()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", path, err)
		}
		out = append(out, u)
	}
}

// installStatusPolicy installs the guard's ValidatingAdmissionPolicy next to
// its webhook, as config/default does.
func (c *Cluster) installStatusPolicy(ctx context.Context) error {
	objs, err := StatusPolicyObjects()
	if err != nil {
		return err
	}
	cl, err := client.New(c.Config, client.Options{})
	if err != nil {
		return err
	}
	for _, u := range objs {
		if err := cl.Create(ctx, u); err != nil {
			return fmt.Errorf("installing %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}
