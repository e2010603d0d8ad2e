// Package servingcert is oria's own management of the escalation guard's
// serving certificate (--cert-management=internal, what config/default
// runs): no cert-manager needed.
//
// Every replica runs the same three parts, leader or not (every replica
// serves the guard):
//   - open-policy-agent/cert-controller's rotator (as kueue and Gatekeeper
//     use it) keeps a CA and a serving certificate for
//     <service>.<namespace>.svc in a Secret of oria's namespace, renews the
//     certificate (and the CA) before they expire or when the Secret is
//     corrupted, and keeps the caBundle of the ValidatingWebhookConfiguration
//     in sync with the Secret's CA;
//   - a mirror (mirror.go) writes the Secret's certificate into
//     --webhook-cert-dir, where the webhook server reads it (an emptyDir in
//     the install), once it verifies against the Secret's CA, and re-creates
//     the Secret when it is deleted: every replica serves the Secret's
//     certificate, within moments of a change, without waiting for the
//     kubelet to refresh a Secret volume;
//   - ServeWhenReady (whenready.go) starts the webhook server only once the certificate
//     is in place and the caBundle injected, and a readiness check
//     (served.go) passes only while the certificate the server presents
//     verifies against the webhook configuration's caBundle for the
//     Service's name: the Service sends admission requests only to a
//     replica the API server trusts.
//
// --cert-management=external (the binary's default) leaves the certificate
// to others: tls.crt and tls.key in --webhook-cert-dir, from cert-manager
// (config/default-certmanager), `make run` or the test suites.
package servingcert

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Mode says who provides the escalation guard's serving certificate.
type Mode string

const (
	// External: tls.crt and tls.key are provided in the certificate
	// directory (cert-manager, `make run`, the tests).
	External Mode = "external"
	// Internal: oria creates and rotates them (this package).
	Internal Mode = "internal"
)

// ParseMode parses the value of --cert-management.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case External, Internal:
		return m, nil
	}
	return "", fmt.Errorf("invalid --cert-management %q: must be %q or %q", s, Internal, External)
}

// The names config/default gives the Secret, the webhook's Service and its
// ValidatingWebhookConfiguration: the defaults of the flags that name them.
const (
	DefaultSecretName               = "oria-webhook-server-cert"
	DefaultServiceName              = "oria-webhook-service"
	DefaultWebhookConfigurationName = "oria-escalation-guard"
)

// The CA's name and organization in the certificates oria makes.
const (
	caName         = "oria-ca"
	caOrganization = "oria"
)

// The certificates' lifetimes: cert-controller's defaults, named here
// because docs/operations.md states them. A certificate is renewed
// LookaheadInterval before it expires; the rotator checks every
// RotationCheckFrequency, and at once on any change of the Secret.
const (
	CACertDuration         = 10 * 365 * 24 * time.Hour
	ServerCertDuration     = 365 * 24 * time.Hour
	LookaheadInterval      = 90 * 24 * time.Hour
	RotationCheckFrequency = 12 * time.Hour
)

// Options name what internal certificate management manages.
type Options struct {
	// Namespace is oria's: it holds the Secret and the webhook's Service.
	Namespace string
	// SecretName is the Secret holding the CA and the serving certificate
	// (ca.crt, ca.key, tls.crt, tls.key).
	SecretName string
	// ServiceName is the Service the API server calls the guard through;
	// the certificate is for <ServiceName>.<Namespace>.svc.
	ServiceName string
	// WebhookConfigurationName is the ValidatingWebhookConfiguration whose
	// caBundle is kept in sync.
	WebhookConfigurationName string
	// CertDir is where the certificate is written and the webhook server
	// reads it (tls.crt, tls.key); it must be writable.
	CertDir string
	// Host and Port are where the webhook server listens (the readiness
	// check connects there).
	Host string
	Port int
}

// Key is the Secret's key.
func (o Options) Key() types.NamespacedName {
	return types.NamespacedName{Namespace: o.Namespace, Name: o.SecretName}
}

// DNSName is the name the API server checks the certificate for: it calls
// a webhook's Service as <service>.<namespace>.svc.
func (o Options) DNSName() string { return o.ServiceName + "." + o.Namespace + ".svc" }

// ExtraDNSNames are the Service's other names, also in the certificate.
func (o Options) ExtraDNSNames() []string { return []string{o.DNSName() + ".cluster.local"} }

// Validate reports a missing name.
func (o Options) Validate() error {
	var errs []error
	for _, f := range []struct{ flag, v string }{
		{"the namespace ($POD_NAMESPACE)", o.Namespace},
		{"--webhook-secret-name", o.SecretName},
		{"--webhook-service-name", o.ServiceName},
		{"--webhook-configuration-name", o.WebhookConfigurationName},
		{"--webhook-cert-dir", o.CertDir},
	} {
		if f.v == "" {
			errs = append(errs, fmt.Errorf("--cert-management=internal needs %s", f.flag))
		}
	}
	if o.Port == 0 {
		errs = append(errs, errors.New("--cert-management=internal needs the escalation guard (--webhook-port)"))
	}
	return errors.Join(errs...)
}
