package servingcert

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// dialTimeout bounds the readiness check's connection to the webhook
// server.
const dialTimeout = 5 * time.Second

// Checker is the readiness check of internal certificate management: it
// passes once the certificate is in place and the caBundle injected, and
// then only while the certificate the webhook server presents verifies,
// for the Service's name, against the caBundle of every webhook of the
// configuration: exactly what the API server checks before it sends an
// admission request. A replica that would present another certificate
// (one from a Secret since replaced, while it takes the new one) is not
// ready, so the Service does not send it requests.
func (m *Manager) Checker() healthz.Checker {
	return func(req *http.Request) error {
		select {
		case <-m.ready:
		default:
			return errors.New("the serving certificate is not in place yet (Secret " + m.opts.Key().String() + ", caBundle of " + m.opts.WebhookConfigurationName + ")")
		}
		hook := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := m.cache.Get(req.Context(), client.ObjectKey{Name: m.opts.WebhookConfigurationName}, hook); err != nil {
			return fmt.Errorf("reading the webhook configuration %s: %w", m.opts.WebhookConfigurationName, err)
		}
		served, err := servedChain(net.JoinHostPort(m.opts.Host, strconv.Itoa(m.opts.Port)), m.opts.DNSName())
		if err != nil {
			return err
		}
		return trusted(hook, served, m.opts.DNSName(), time.Now())
	}
}

// servedChain connects to the webhook server at addr and returns the
// certificates it presents for serverName.
func servedChain(addr, serverName string) ([]*x509.Certificate, error) {
	d := &net.Dialer{Timeout: dialTimeout}
	// Not verified here: trusted verifies against the caBundle.
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{ServerName: serverName, InsecureSkipVerify: true}) //nolint:gosec // verified by trusted
	if err != nil {
		return nil, fmt.Errorf("connecting to the webhook server at %s: %w", addr, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates, nil
}

// trusted reports why the API server would not trust chain (a leaf first,
// as presented) for dnsName at now through every webhook of hook (nil when
// it would).
func trusted(hook *admissionregistrationv1.ValidatingWebhookConfiguration, chain []*x509.Certificate, dnsName string, now time.Time) error {
	if len(chain) == 0 {
		return errors.New("the webhook server presents no certificate")
	}
	if len(hook.Webhooks) == 0 {
		return fmt.Errorf("the webhook configuration %s has no webhooks", hook.Name)
	}
	intermediates := x509.NewCertPool()
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	for _, w := range hook.Webhooks {
		roots := x509.NewCertPool()
		if len(w.ClientConfig.CABundle) == 0 || !roots.AppendCertsFromPEM(w.ClientConfig.CABundle) {
			return fmt.Errorf("webhook %s of %s has no caBundle yet", w.Name, hook.Name)
		}
		if _, err := chain[0].Verify(x509.VerifyOptions{
			DNSName: dnsName, Roots: roots, Intermediates: intermediates, CurrentTime: now, KeyUsages: serverUsages,
		}); err != nil {
			return fmt.Errorf("the certificate the webhook server presents is not trusted through webhook %s of %s: %w", w.Name, hook.Name, err)
		}
	}
	return nil
}
