// Package manager builds oria's controller-runtime manager and configures
// its caches: the scheme, the cache filters that keep memory flat on large
// clusters (oria-labelled RBAC only, metadata-only CRDs, the lean binding
// transform, a watch connection of its own), the bundle-role cache, the
// client rate limit, the metrics server, the health checks and, with
// --cert-management=internal, the guard's own serving certificate
// (internal/servingcert). cmd/oria and the test suites share it so that
// tests run with the same cache as production. What the controllers look up through the cache is
// internal/lookup; the controllers are registered by
// internal/controller.SetupAll (they import this package, so it cannot
// import them).
package manager

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/lookup"
	"github.com/operator-framework/oria/internal/olm"
	"github.com/operator-framework/oria/internal/scheme"
	"github.com/operator-framework/oria/internal/servingcert"
)

// LeaderElectionID is the name of the Lease oria replicas elect a leader with.
const LeaderElectionID = "oria.operatorframework.io"

// The client-side rate limit of oria's API client (the --kube-api-qps and
// --kube-api-burst flags of cmd/oria).
//
// By default oria has no client-side limit, as controller-runtime's own
// GetConfig. A token bucket sized for a large fan-out still throttles it:
// N writes past the burst take (N - burst) / QPS seconds whatever the API
// server could take (docs/benchmarks.md, History, fd068b3).
// It is safe without one (docs/operations.md) because:
//   - the API server protects itself with API Priority and Fairness: a
//     ServiceAccount's requests are queued fairly against other users' in
//     their priority level (workload-low by default), and the excess is
//     rejected with 429 and a Retry-After header instead of overloading it;
//   - client-go retries a 429 after the Retry-After delay (up to 10 times),
//     and a request that still fails requeues its object with the
//     controller's backoff;
//   - oria's writes are bounded: at most engine.MaxInFlight (128) in
//     flight for all the controllers (one engine.Engine, made by
//     controller.SetupAll), whatever MaxConcurrentReconciles is
//     (each reconcile's pool of engine.DefaultWorkers shares those tokens),
//     besides watches, cache reads, one status write per reconcile, Events,
//     leader election and the escalation guard's SubjectAccessReviews (8
//     per admission request).
//
// A positive QPS restores a token bucket of that rate and burst, e.g. on an
// API server without Priority and Fairness.
const (
	// NoClientRateLimit, as the QPS, disables client-go's token bucket.
	NoClientRateLimit = -1
	// DefaultKubeAPIQPS is oria's default: no client-side limit.
	DefaultKubeAPIQPS = NoClientRateLimit
	// DefaultKubeAPIBurst is the burst of a positive QPS.
	DefaultKubeAPIBurst = 1000
)

// SetClientRateLimit sets cfg's client-side rate limit: a positive qps is a
// token bucket of qps and burst, a negative one no client-side limit
// (client-go builds no token bucket for a negative QPS; zero would mean its
// default of 5).
func SetClientRateLimit(cfg *rest.Config, qps float64, burst int) {
	cfg.RateLimiter = nil
	if qps < 0 {
		cfg.QPS, cfg.Burst = NoClientRateLimit, 0
		return
	}
	cfg.QPS, cfg.Burst = float32(qps), burst
}

// The leader election's default timing (controller-runtime's and
// kube-controller-manager's): a replica that died without releasing the
// Lease is replaced after DefaultLeaseDuration and up to a retry period more;
// a replica that stops gracefully releases it at once, and another takes over
// within a retry period (docs/operations.md).
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// Options are the settings cmd/oria exposes as flags.
type Options struct {
	// DefaultRBACMode applies to ClusterExtensions without the rbac-mode
	// annotation.
	DefaultRBACMode oriav1alpha1.RBACMode
	// MaxConcurrentReconciles is the number of workers per controller; 0
	// gives each controller its DefaultMaxConcurrentReconciles.
	MaxConcurrentReconciles int
	// MetricsBindAddress, e.g. ":8443"; "0" disables the metrics server.
	MetricsBindAddress string
	// MetricsSecure serves metrics over HTTPS, only to clients the API
	// server authenticates (TokenReview) and authorizes to get /metrics
	// (SubjectAccessReview); plain HTTP otherwise.
	MetricsSecure bool
	// MetricsCertDir holds tls.crt and tls.key for MetricsSecure; empty (or
	// no files there) means a self-signed certificate made in memory.
	MetricsCertDir string
	// HealthProbeBindAddress serves /healthz and /readyz; "0" disables it.
	HealthProbeBindAddress string
	// PprofBindAddress serves net/http/pprof; "" or "0" disables it.
	PprofBindAddress string
	// LeaderElection makes only one replica reconcile at a time.
	LeaderElection bool
	// LeaderElectionNamespace holds the leader election Lease.
	LeaderElectionNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod time the leader election
	// (client-go's); zero means DefaultLeaseDuration, DefaultRenewDeadline
	// and DefaultRetryPeriod.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// WebhookPort serves the escalation guard (internal/admission); 0
	// disables it.
	WebhookPort int
	// WebhookHost is the address the guard listens on; "" means every
	// interface.
	WebhookHost string
	// WebhookCertDir holds the guard's serving certificate, tls.crt and
	// tls.key.
	WebhookCertDir string
	// CertManagement says who provides that certificate:
	// servingcert.External (empty means the same: files in WebhookCertDir)
	// or servingcert.Internal (oria, which writes them there).
	CertManagement servingcert.Mode
	// Certificates names what internal certificate management manages;
	// New sets its CertDir, Host and Port from the three above.
	Certificates servingcert.Options
	// ExpiryWarning is how long before a time-bound grant expires its
	// AccessExpiring Event is recorded; 0 records none.
	ExpiryWarning time.Duration
	// BaseContext, when set, gives the context values of every runnable
	// of the manager, its controllers' reconciles included (the first-pass
	// Tracker, internal/firstpass).
	BaseContext func() context.Context
}

// Scheme returns a scheme with every type oria reads or writes
// (scheme.New).
func Scheme() (*runtime.Scheme, error) { return scheme.New() }

// CacheOptions returns the cache configuration every oria manager uses:
//   - RBAC objects are cached only when oria created them (LabelManaged);
//     anything else (a same-name object in conflict, a bundle-provided
//     ClusterRole) is read through the manager's API reader when needed;
//   - CRDs are cached as metadata only, and only those operator-controller
//     installed for a ClusterExtension;
//   - ConfigMaps are cached only when oria publishes into them (a
//     ScopeInstance's spec.publication; LabelPublished): the rest of the
//     cluster's ConfigMaps never reach oria's memory;
//   - managedFields are dropped from every cached object, and bindings
//     share their repeating parts (LeanBindings);
//   - the cache lists and watches on a connection of its own to cfg's API
//     server (WatchHTTPClient), so that oria's writes do not hold up its
//     watches.
func CacheOptions(cfg *rest.Config) (cache.Options, error) {
	hc, err := WatchHTTPClient(cfg)
	if err != nil {
		return cache.Options{}, err
	}
	managed := cache.ByObject{Label: lookup.ManagedSelector()}
	bindings := cache.ByObject{Label: lookup.ManagedSelector(), Transform: LeanBindings()}
	return cache.Options{
		HTTPClient:       hc,
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&rbacv1.ClusterRole{}:        managed,
			&rbacv1.ClusterRoleBinding{}: bindings,
			&rbacv1.RoleBinding{}:        bindings,
			&corev1.ConfigMap{}:          {Label: lookup.PublishedSelector()},
			lookup.CRDMetadata():         {Label: olm.InstalledByExtension()},
		},
	}, nil
}

// MetricsServerOptions serves /metrics as kubebuilder scaffolds it when
// opts.MetricsSecure: HTTPS (HTTP/1.1 only, against the HTTP/2 rapid-reset
// and stream-cancellation attacks) behind controller-runtime's
// authentication and authorization filter, so that only who may get the
// non-resource URL /metrics (the metrics-reader ClusterRole) reads it.
func MetricsServerOptions(opts Options) metricsserver.Options {
	o := metricsserver.Options{BindAddress: opts.MetricsBindAddress}
	if opts.MetricsSecure {
		o.SecureServing = true
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
		o.CertDir = opts.MetricsCertDir
		o.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	}
	return o
}

// New returns a manager with oria's scheme, cache and health checks; add the
// controllers with internal/controller.SetupAll.
func New(cfg *rest.Config, opts Options) (ctrl.Manager, error) {
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	var webhookServer webhook.Server
	var certs *servingcert.Manager
	if opts.WebhookPort != 0 {
		webhookServer = webhook.NewServer(webhook.Options{Host: opts.WebhookHost, Port: opts.WebhookPort, CertDir: opts.WebhookCertDir})
		if opts.CertManagement == servingcert.Internal {
			co := opts.Certificates
			co.CertDir, co.Host, co.Port = opts.WebhookCertDir, opts.WebhookHost, opts.WebhookPort
			if certs, err = servingcert.New(co); err != nil {
				return nil, fmt.Errorf("internal certificate management: %w", err)
			}
			webhookServer = certs.ServeWhenReady(webhookServer)
		}
	}
	cacheOpts, err := CacheOptions(cfg)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		WebhookServer:                 webhookServer,
		Cache:                         cacheOpts,
		Metrics:                       MetricsServerOptions(opts),
		HealthProbeBindAddress:        opts.HealthProbeBindAddress,
		PprofBindAddress:              opts.PprofBindAddress,
		LeaderElection:                opts.LeaderElection,
		LeaderElectionID:              LeaderElectionID,
		LeaderElectionNamespace:       opts.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 orDefault(opts.LeaseDuration, DefaultLeaseDuration),
		RenewDeadline:                 orDefault(opts.RenewDeadline, DefaultRenewDeadline),
		RetryPeriod:                   orDefault(opts.RetryPeriod, DefaultRetryPeriod),
		BaseContext:                   opts.BaseContext,
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding healthz check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding readyz check: %w", err)
	}
	if webhookServer != nil {
		// Ready only once the escalation guard serves: until then every
		// write of an oria object is refused (the webhook fails closed).
		if err := mgr.AddReadyzCheck("webhook", webhookServer.StartedChecker()); err != nil {
			return nil, fmt.Errorf("adding webhook readyz check: %w", err)
		}
	}
	if certs != nil {
		// Ready only while the certificate served is the one the API
		// server trusts (internal/servingcert).
		ctx, cancel := context.WithTimeout(context.Background(), certSetupTimeout)
		defer cancel()
		if err := certs.Setup(ctx, mgr); err != nil {
			return nil, fmt.Errorf("setting up the serving certificate: %w", err)
		}
		if err := mgr.AddReadyzCheck("webhook-certificate", certs.Checker()); err != nil {
			return nil, fmt.Errorf("adding webhook certificate readyz check: %w", err)
		}
	}
	return mgr, nil
}

// certSetupTimeout bounds the API requests of internal certificate
// management's setup (reading, or creating, its Secret).
const certSetupTimeout = 30 * time.Second

func orDefault(d, def time.Duration) *time.Duration {
	if d <= 0 {
		d = def
	}
	return &d
}
