package servingcert

import (
	"context"
	"crypto/x509"
	"fmt"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// RotatorName is the rotator's controller name; MirrorName the mirror's.
const (
	RotatorName = "webhook-cert-rotator"
	MirrorName  = "webhook-cert-mirror"
)

// FieldOwner is the field manager of the caBundle oria writes.
const FieldOwner = "oria-cert-rotator"

// serverUsages are the serving certificate's extended key usages.
var serverUsages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}

// Manager is internal certificate management for one oria manager: make it
// with New, wrap the webhook server with it (ServeWhenReady) before making the manager,
// then Setup.
type Manager struct {
	opts Options
	// ready is closed by the rotator once the certificate is in the
	// certificate directory and the caBundle injected.
	ready chan struct{}
	// cache holds the Secret and the webhook configuration, by name.
	cache cache.Cache
}

// New returns internal certificate management for opts.
func New(opts Options) (*Manager, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Manager{opts: opts, ready: make(chan struct{})}, nil
}

// ServeWhenReady returns srv, whose Start waits until the certificate is in place:
// it never serves one from an earlier Secret, nor fails for want of one.
func (m *Manager) ServeWhenReady(srv webhook.Server) webhook.Server {
	return &readyServer{Server: srv, ready: m.ready}
}

// Ready is closed once the certificate is in place and the caBundle
// injected.
func (m *Manager) Ready() <-chan struct{} { return m.ready }

// Setup prepares mgr: it clears the certificate directory of anything an
// earlier run wrote, creates the Secret when it does not exist (the
// rotator starts from an existing Secret), and adds the rotator, the
// mirror and their cache. The readiness check is Checker.
func (m *Manager) Setup(ctx context.Context, mgr ctrl.Manager) error {
	if err := clearFiles(m.opts.CertDir); err != nil {
		return err
	}
	if err := ensureSecret(ctx, mgr.GetAPIReader(), mgr.GetClient(), m.opts.Key()); err != nil {
		return err
	}
	if err := m.addCache(mgr); err != nil {
		return err
	}
	if err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      m.opts.Key(),
		CertDir:        m.opts.CertDir,
		CAName:         caName,
		CAOrganization: caOrganization,
		DNSName:        m.opts.DNSName(),
		ExtraDNSNames:  m.opts.ExtraDNSNames(),
		IsReady:        m.ready,
		Webhooks:       []rotator.WebhookInfo{{Name: m.opts.WebhookConfigurationName, Type: rotator.Validating}},
		FieldOwner:     FieldOwner,
		// Every replica serves the guard, so every replica runs it.
		RequireLeaderElection:  false,
		ExtKeyUsages:           &serverUsages,
		CaCertDuration:         CACertDuration,
		ServerCertDuration:     ServerCertDuration,
		LookaheadInterval:      LookaheadInterval,
		RotationCheckFrequency: RotationCheckFrequency,
		ControllerName:         RotatorName,
	}); err != nil {
		return fmt.Errorf("adding the certificate rotator: %w", err)
	}
	c, err := controller.New(MirrorName, mgr, controller.Options{
		Reconciler:         &mirror{opts: m.opts, reader: m.cache, writer: mgr.GetClient()},
		NeedLeaderElection: ptr.To(false),
	})
	if err != nil {
		return fmt.Errorf("adding the certificate mirror: %w", err)
	}
	return c.Watch(source.Kind(m.cache, &corev1.Secret{}, &handler.TypedEnqueueRequestForObject[*corev1.Secret]{}))
}

// addCache adds a cache of the Secret and the webhook configuration (by
// name: nothing else) to mgr, started on every replica.
func (m *Manager) addCache(mgr ctrl.Manager) error {
	byName := func(name string) cache.ByObject {
		return cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", name)}
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme:            mgr.GetScheme(),
		Mapper:            mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{m.opts.Namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: byName(m.opts.SecretName),
			&admissionregistrationv1.ValidatingWebhookConfiguration{}: byName(m.opts.WebhookConfigurationName),
		},
	})
	if err != nil {
		return fmt.Errorf("creating the certificate cache: %w", err)
	}
	m.cache = c
	return mgr.Add(cacheRunnable{c})
}

// cacheRunnable has the manager start its cache with its own caches
// (before the controllers, on every replica).
type cacheRunnable struct{ cache.Cache }

func (c cacheRunnable) GetCache() cache.Cache { return c.Cache }

// ensureSecret creates the Secret, empty, unless it exists: the rotator
// fills it.
func ensureSecret(ctx context.Context, r client.Reader, w client.Writer, key client.ObjectKey) error {
	err := r.Get(ctx, key, &corev1.Secret{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading the serving certificate's Secret %s: %w", key, err)
	}
	if err := w.Create(ctx, emptySecret(key)); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the serving certificate's Secret %s: %w", key, err)
	}
	return nil
}

// emptySecret is the Secret oria creates for the rotator to fill.
func emptySecret(key client.ObjectKey) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: key.Namespace, Name: key.Name,
			Labels: map[string]string{"app.kubernetes.io/name": "oria", "app.kubernetes.io/component": "webhook-certificate"},
		},
		Type: corev1.SecretTypeOpaque,
	}
}
