package cli

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// dialTimeout bounds the TLS handshake with a webhook's URL.
const dialTimeout = 5 * time.Second

// ReadCheck reads from the cluster what `kubectl oria check` judges, for
// oria installed in namespace. It writes nothing: the webhook is tried
// with a server-side dry run. A cluster that does not answer (no API
// server's answer to the first read) is an error; what the API server
// refuses to show is in the facts.
func ReadCheck(ctx context.Context, c client.Client, namespace, pluginVersion string) (*CheckFacts, error) {
	f := &CheckFacts{Now: time.Now(), PluginVersion: pluginVersion, Namespace: namespace, CRDs: map[string]CRDFact{}, Served: map[string]ServedCert{}}
	for i, name := range append([]string{ClusterExtensionCRD}, OriaCRDs...) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := c.Get(ctx, client.ObjectKey{Name: name}, crd)
		var status apierrors.APIStatus
		if i == 0 && err != nil && !errors.As(err, &status) {
			return nil, fmt.Errorf("reading CRD %s: %w", name, err)
		}
		switch {
		case apierrors.IsNotFound(err):
			f.CRDs[name] = CRDFact{}
		case err != nil:
			f.CRDs[name] = CRDFact{Err: err}
		default:
			f.CRDs[name] = CRDFact{CRD: crd}
		}
	}
	readWebhooks(ctx, c, f)
	f.Deployment, f.DeploymentErr = get(ctx, c, namespace, DeploymentName, &appsv1.Deployment{})
	f.LeaseNamespace = namespace
	f.Lease, f.LeaseErr = get(ctx, c, namespace, LeaseName, &coordinationv1.Lease{})
	if f.Lease == nil && f.LeaseErr == nil && namespace != OutsideLeaseNamespace && OutsideURL(f) != "" {
		// oria outside the cluster holds its Lease where it defaults to
		// outside a pod.
		if l, err := get(ctx, c, OutsideLeaseNamespace, LeaseName, &coordinationv1.Lease{}); err == nil && l != nil {
			f.Lease, f.LeaseNamespace = l, OutsideLeaseNamespace
		}
	}
	if f.Deployment != nil {
		f.Pods, f.PodsErr = podsOf(ctx, c, f.Deployment)
		f.Nodes = readNodes(ctx, c)
	}
	return f, nil
}

// get reads one object; nil, nil when it does not exist.
func get[T client.Object](ctx context.Context, c client.Reader, namespace, name string, obj T) (T, error) {
	var none T
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return none, nil
		}
		return none, err
	}
	return obj, nil
}

// readWebhooks finds the configurations with the guard's webhook, shakes
// hands with those served at a URL, and makes the dry run.
func readWebhooks(ctx context.Context, c client.Client, f *CheckFacts) {
	var list admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := c.List(ctx, &list); err != nil {
		f.WebhooksErr = err
		return
	}
	for _, cfg := range list.Items {
		wh := guardWebhook(&cfg)
		if wh == nil {
			continue
		}
		f.Webhooks = append(f.Webhooks, cfg)
		if wh.ClientConfig.URL != nil {
			f.Served[cfg.Name] = probeTLS(ctx, *wh.ClientConfig.URL, wh.ClientConfig.CABundle)
		}
	}
	if len(f.Webhooks) > 0 {
		f.DryRunObject, f.DryRunErr = dryRunProbe(ctx, c)
	}
}

// dryRunProbe asks the API server to create, without persisting it, a
// ScopeTemplate of a name of its own that grants nothing (the built-in
// view role for a user nobody is, bound by no instance): the guard is
// called for it, and admits it for anyone who may create ScopeTemplates.
func dryRunProbe(ctx context.Context, c client.Client) (string, error) {
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return "", err
	}
	t := &oriav1alpha1.ScopeTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "oria-check-" + hex.EncodeToString(suffix)},
		Spec: oriav1alpha1.ScopeTemplateSpec{
			ClusterRoles:    []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}},
			BindingTemplate: oriav1alpha1.BindingTemplate{Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "oria-check"}}},
		},
	}
	return "ScopeTemplate " + t.Name, c.Create(ctx, t, client.DryRunAll)
}

// probeTLS connects to a webhook's URL and checks the certificate it serves
// against caBundle, for the URL's host.
func probeTLS(ctx context.Context, rawURL string, caBundle []byte) ServedCert {
	s := ServedCert{URL: rawURL}
	u, err := url.Parse(rawURL)
	if err != nil {
		s.Err = err
		return s
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "443")
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	// Verified below against the caBundle, not the system's roots.
	d := &tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}} //nolint:gosec
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		s.Err = err
		return s
	}
	defer func() { _ = conn.Close() }()
	certs := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(certs) == 0 {
		s.Err = fmt.Errorf("no certificate served")
		return s
	}
	s.Subject, s.NotAfter = describeCert(certs[0]), certs[0].NotAfter
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	roots.AppendCertsFromPEM(caBundle)
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, s.VerifyErr = certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: u.Hostname()})
	return s
}

// describeCert names a certificate by its subject and the names it is for.
func describeCert(c *x509.Certificate) string {
	names := append([]string(nil), c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	out := "subject " + c.Subject.String()
	if len(names) > 0 {
		out += " for " + strings.Join(names, ", ")
	}
	return out
}

// podsOf lists the names of a Deployment's pods.
func podsOf(ctx context.Context, c client.Reader, d *appsv1.Deployment) ([]string, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(d.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pods.Items {
		out = append(out, p.Name)
	}
	return out, nil
}
