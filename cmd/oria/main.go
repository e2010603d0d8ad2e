// Command oria runs the oria controller manager: RBAC for the APIs that OLM v1
// ClusterExtensions install, and the ScopeTemplate / ScopeInstance binding
// layer beneath it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/admission"
	"github.com/operator-framework/oria/internal/controller"
	"github.com/operator-framework/oria/internal/controller/scopeinstance"
	"github.com/operator-framework/oria/internal/firstpass"
	"github.com/operator-framework/oria/internal/manager"
	"github.com/operator-framework/oria/internal/metrics"
	"github.com/operator-framework/oria/internal/servingcert"
)

const (
	// defaultWebhookPort and defaultWebhookCertDir are controller-runtime's
	// defaults, where config/default mounts the serving certificate.
	defaultWebhookPort    = 9443
	defaultWebhookCertDir = "/tmp/k8s-webhook-server/serving-certs"
)

// config is the parsed command line.
type config struct {
	opts    manager.Options
	qps     float64
	burst   int
	zap     zap.Options
	version bool
}

// defaultGCPercent is oria's garbage-collection target when GOGC is not
// set. oria's memory is mostly its caches, and it spends most of its time
// waiting on the API server: collecting twice as often costs little CPU and
// keeps the peak near the live heap (docs/benchmarks.md, "Figures behind the
// code": GOGC).
const defaultGCPercent = 50

// tuneGC applies defaultGCPercent unless the GOGC environment variable says
// otherwise.
func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "oria: %v\n", err)
		os.Exit(2)
	}
	if cfg.version {
		printVersion(os.Stdout)
		os.Exit(0)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&cfg.zap)))
	tuneGC()
	memLimit, err := tuneMemory()
	if err != nil {
		fmt.Fprintf(os.Stderr, "oria: %v\n", err)
		os.Exit(2)
	}
	if memLimit > 0 {
		ctrl.Log.Info("Go memory limit set from the container's", "goMemLimitBytes", memLimit, "percentOfContainerLimit", memoryLimitPercent)
	}
	if err := run(cfg); err != nil {
		ctrl.Log.Error(err, "oria stopped")
		os.Exit(1)
	}
}

// parseFlags parses and validates args; any invalid value is an error that
// names the flag and the allowed values.
func parseFlags(args []string, out io.Writer) (*config, error) {
	cfg := &config{}
	fs := flag.NewFlagSet("oria", flag.ContinueOnError)
	fs.SetOutput(out)
	var mode string
	fs.StringVar(&mode, "default-rbac-mode", string(oriav1alpha1.RBACModeUnmanaged),
		fmt.Sprintf("RBAC mode for ClusterExtensions without the %s annotation: %s", oriav1alpha1.AnnotationRBACMode, oriav1alpha1.RBACModeNames()))
	fs.Float64Var(&cfg.qps, "kube-api-qps", manager.DefaultKubeAPIQPS,
		"Client-side limit of queries per second to the Kubernetes API; -1 (the default) means no client-side limit: "+
			"the API server's Priority and Fairness and oria's bounded worker pools limit the load.")
	fs.IntVar(&cfg.burst, "kube-api-burst", manager.DefaultKubeAPIBurst, "Burst of queries above a positive --kube-api-qps.")
	fs.IntVar(&cfg.opts.MaxConcurrentReconciles, "max-concurrent-reconciles", 0,
		"Reconciles per controller at once; 0 (the default): each controller's own, 16 for ClusterExtensions and 4 for the others "+
			"(for ScopeInstances: fan-outs bound at once, with 12 more workers for revocations and small grants).")
	fs.BoolVar(&cfg.opts.LeaderElection, "leader-elect", false, "Elect a leader so that only one replica reconciles.")
	fs.StringVar(&cfg.opts.LeaderElectionNamespace, "leader-election-namespace", "",
		"Namespace of the leader election Lease (default: $POD_NAMESPACE, else the pod's namespace in a cluster, kube-system outside).")
	fs.DurationVar(&cfg.opts.LeaseDuration, "leader-election-lease-duration", manager.DefaultLeaseDuration,
		"How long a replica waits, after the leader last renewed the Lease, before it takes over: the time to replace a leader that died without releasing it.")
	fs.DurationVar(&cfg.opts.RenewDeadline, "leader-election-renew-deadline", manager.DefaultRenewDeadline,
		"How long the leader keeps trying to renew the Lease before it gives up leading (and exits); less than the lease duration.")
	fs.DurationVar(&cfg.opts.RetryPeriod, "leader-election-retry-period", manager.DefaultRetryPeriod,
		"How often replicas try to acquire or renew the Lease; less than the renew deadline.")
	fs.DurationVar(&cfg.opts.ExpiryWarning, "expiry-warning", scopeinstance.DefaultExpiryWarning,
		"How long before a time-bound grant (spec.expiresAt) ends oria records a Normal AccessExpiring event naming its subjects; 0 records none.")
	fs.BoolVar(&cfg.version, "version", false, "Print oria's version and exit.")
	fs.StringVar(&cfg.opts.MetricsBindAddress, "metrics-bind-address", ":8443", "Address of the Prometheus metrics endpoint; 0 disables it.")
	fs.BoolVar(&cfg.opts.MetricsSecure, "metrics-secure", true,
		"Serve metrics over HTTPS to clients allowed to get /metrics (TokenReview and SubjectAccessReview); false serves plain HTTP to anyone, for a loopback address only.")
	fs.StringVar(&cfg.opts.MetricsCertDir, "metrics-cert-dir", "",
		"Directory with tls.crt and tls.key for the metrics endpoint; empty means a self-signed certificate.")
	fs.StringVar(&cfg.opts.HealthProbeBindAddress, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz; 0 disables them.")
	fs.StringVar(&cfg.opts.PprofBindAddress, "pprof-bind-address", "", "Address of net/http/pprof; empty or 0 disables it.")
	fs.IntVar(&cfg.opts.WebhookPort, "webhook-port", defaultWebhookPort,
		"Port of the escalation guard, the validating webhook for oria's kinds; 0 disables it (only where its ValidatingWebhookConfiguration is not installed).")
	fs.StringVar(&cfg.opts.WebhookHost, "webhook-host", "", "Address the escalation guard listens on; empty means every interface.")
	fs.StringVar(&cfg.opts.WebhookCertDir, "webhook-cert-dir", defaultWebhookCertDir,
		"Directory with the escalation guard's serving certificate (tls.crt, tls.key); with --cert-management=internal oria writes it there (a writable directory, e.g. an emptyDir).")
	var certMode string
	fs.StringVar(&certMode, "cert-management", string(servingcert.External),
		"Who provides the escalation guard's serving certificate: external (tls.crt and tls.key in --webhook-cert-dir, e.g. from cert-manager) or internal "+
			"(oria makes and rotates a CA and certificate in the Secret --webhook-secret-name of its namespace, keeps the caBundle of --webhook-configuration-name in sync, "+
			"and every replica serves from that Secret; config/default sets it).")
	fs.StringVar(&cfg.opts.Certificates.SecretName, "webhook-secret-name", servingcert.DefaultSecretName,
		"With --cert-management=internal: the Secret, in oria's namespace, holding the CA and the serving certificate.")
	fs.StringVar(&cfg.opts.Certificates.ServiceName, "webhook-service-name", servingcert.DefaultServiceName,
		"With --cert-management=internal: the Service, in oria's namespace, the API server calls the guard through; the certificate is for <service>.<namespace>.svc.")
	fs.StringVar(&cfg.opts.Certificates.WebhookConfigurationName, "webhook-configuration-name", servingcert.DefaultWebhookConfigurationName,
		"With --cert-management=internal: the ValidatingWebhookConfiguration whose caBundle oria keeps in sync.")
	cfg.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	m, ok := oriav1alpha1.ParseRBACMode(mode)
	if !ok {
		return nil, fmt.Errorf("invalid --default-rbac-mode %q: must be one of %s", mode, oriav1alpha1.RBACModeNames())
	}
	cfg.opts.DefaultRBACMode = m
	switch {
	case cfg.qps < 0:
		cfg.qps = manager.NoClientRateLimit
	case cfg.qps == 0:
		return nil, fmt.Errorf("invalid --kube-api-qps %v: must be greater than 0, or -1 for no client-side limit", cfg.qps)
	}
	if cfg.burst < 1 {
		return nil, fmt.Errorf("invalid --kube-api-burst %d: must be at least 1", cfg.burst)
	}
	certs, err := servingcert.ParseMode(certMode)
	if err != nil {
		return nil, err
	}
	cfg.opts.CertManagement = certs
	if cfg.opts.WebhookPort < 0 || cfg.opts.WebhookPort > 65535 {
		return nil, fmt.Errorf("invalid --webhook-port %d: must be a port number, or 0 to disable the escalation guard", cfg.opts.WebhookPort)
	}
	if !cfg.opts.MetricsSecure && !loopbackOrOff(cfg.opts.MetricsBindAddress) {
		return nil, fmt.Errorf("invalid --metrics-bind-address %q with --metrics-secure=false: plain HTTP metrics may listen on a loopback address only (127.0.0.1:<port>)", cfg.opts.MetricsBindAddress)
	}
	if err := checkLeaderElection(cfg.opts); err != nil {
		return nil, err
	}
	if cfg.opts.ExpiryWarning < 0 {
		return nil, fmt.Errorf("invalid --expiry-warning %v: must be a duration of 0 or more (0: no warning)", cfg.opts.ExpiryWarning)
	}
	if cfg.opts.MaxConcurrentReconciles < 0 {
		return nil, fmt.Errorf("invalid --max-concurrent-reconciles %d: must be at least 1, or 0 for each controller's default", cfg.opts.MaxConcurrentReconciles)
	}
	return cfg, nil
}

// loopbackOrOff reports whether addr disables the endpoint ("0") or
// listens on a loopback address only.
func loopbackOrOff(addr string) bool {
	if addr == "0" {
		return true
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func run(cfg *config) error {
	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	manager.SetClientRateLimit(restCfg, cfg.qps, cfg.burst)
	restCfg.UserAgent = rest.DefaultKubernetesUserAgent() + " oria"
	if cfg.opts.LeaderElection && cfg.opts.LeaderElectionNamespace == "" {
		cfg.opts.LeaderElectionNamespace = podNamespace()
	}
	if cfg.opts.CertManagement == servingcert.Internal {
		cfg.opts.Certificates.Namespace = podNamespace()
	}
	if err := checkServingCert(cfg.opts); err != nil {
		return err
	}
	// The first full pass after start or takeover is logged and measured
	// (internal/firstpass): the Tracker reaches the reconciles through the
	// manager's base context.
	pass := firstpass.New(ctrl.Log.WithName("first-pass"), firstpass.Kinds()...)
	cfg.opts.BaseContext = pass.Context
	mgr, err := manager.New(restCfg, cfg.opts)
	if err != nil {
		return err
	}
	if err := controller.SetupAll(mgr, cfg.opts); err != nil {
		return fmt.Errorf("setting up controllers: %w", err)
	}
	if err := pass.Setup(mgr); err != nil {
		return err
	}
	if cfg.opts.WebhookPort != 0 {
		if err := admission.Setup(mgr); err != nil {
			return fmt.Errorf("setting up the escalation guard: %w", err)
		}
	}
	if err := metrics.Register(mgr.GetCache()); err != nil {
		return fmt.Errorf("registering oria's metrics: %w", err)
	}
	limit := []any{"qps", cfg.qps, "burst", cfg.burst}
	if cfg.qps < 0 {
		limit = []any{"qps", "no client-side limit"}
	}
	ctrl.Log.Info("starting oria", append([]any{"version", Version(), "defaultRBACMode", cfg.opts.DefaultRBACMode,
		"maxConcurrentReconciles", cfg.opts.MaxConcurrentReconciles,
		"webhookPort", cfg.opts.WebhookPort, "webhookCertDir", cfg.opts.WebhookCertDir, "certManagement", cfg.opts.CertManagement,
		"metrics", cfg.opts.MetricsBindAddress, "metricsSecure", cfg.opts.MetricsSecure,
		"leaderElection", cfg.opts.LeaderElection, "leaseDuration", cfg.opts.LeaseDuration,
		"renewDeadline", cfg.opts.RenewDeadline, "retryPeriod", cfg.opts.RetryPeriod}, limit...)...)
	return mgr.Start(ctrl.SetupSignalHandler())
}

// checkServingCert explains a missing serving certificate up front, rather
// than as a webhook server failing to start.
func checkServingCert(opts manager.Options) error {
	if opts.WebhookPort == 0 || opts.CertManagement == servingcert.Internal {
		return nil
	}
	for _, f := range []string{"tls.crt", "tls.key"} {
		if _, err := os.Stat(filepath.Join(opts.WebhookCertDir, f)); err != nil {
			return fmt.Errorf("the escalation guard (--webhook-port=%d) needs its serving certificate in --webhook-cert-dir=%s: %w "+
				"(--cert-management=internal has oria make it, as config/default does; config/default-certmanager has cert-manager issue it; `make run` generates one; "+
				"--webhook-port=0 disables the guard where its webhook configuration is not installed)",
				opts.WebhookPort, opts.WebhookCertDir, err)
		}
	}
	return nil
}

// leaderelectionJitter is client-go's leaderelection.JitterFactor: a
// replica waits up to that many retry periods between attempts.
const leaderelectionJitter = 1.2

// checkLeaderElection refuses lease timings client-go's leader election
// would reject later (or that would make a leader give up before another
// replica may take over).
func checkLeaderElection(o manager.Options) error {
	switch {
	case o.RetryPeriod <= 0:
		return fmt.Errorf("invalid --leader-election-retry-period %v: must be positive", o.RetryPeriod)
	case float64(o.RenewDeadline) <= leaderelectionJitter*float64(o.RetryPeriod):
		return fmt.Errorf("invalid --leader-election-renew-deadline %v: must be longer than %v × --leader-election-retry-period %v", o.RenewDeadline, leaderelectionJitter, o.RetryPeriod)
	case o.LeaseDuration <= o.RenewDeadline:
		return fmt.Errorf("invalid --leader-election-lease-duration %v: must be longer than --leader-election-renew-deadline %v", o.LeaseDuration, o.RenewDeadline)
	}
	return nil
}
