package main

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/manager"
	"github.com/operator-framework/oria/internal/servingcert"
)

func TestParseFlagsDefaults(t *testing.T) {
	cfg, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.opts.DefaultRBACMode != oriav1alpha1.RBACModeUnmanaged {
		t.Errorf("default mode = %q, want Unmanaged", cfg.opts.DefaultRBACMode)
	}
	if cfg.opts.MaxConcurrentReconciles != 0 {
		t.Errorf("max-concurrent-reconciles = %d, want 0 (each controller's default)", cfg.opts.MaxConcurrentReconciles)
	}
	// No client-side limit by default: API Priority and Fairness and the
	// worker pools bound the load (manager.DefaultKubeAPIQPS).
	if cfg.qps != -1 || cfg.burst != manager.DefaultKubeAPIBurst {
		t.Errorf("qps/burst = %v/%d, want -1/%d", cfg.qps, cfg.burst, manager.DefaultKubeAPIBurst)
	}
	if cfg.opts.WebhookPort != defaultWebhookPort || cfg.opts.WebhookCertDir != defaultWebhookCertDir {
		t.Errorf("the escalation guard is on by default: port %d, cert dir %q", cfg.opts.WebhookPort, cfg.opts.WebhookCertDir)
	}
	if !cfg.opts.MetricsSecure || cfg.opts.MetricsBindAddress != ":8443" {
		t.Errorf("metrics = %q secure=%v, want :8443 secure", cfg.opts.MetricsBindAddress, cfg.opts.MetricsSecure)
	}
	if cfg.opts.ExpiryWarning != 15*time.Minute {
		t.Errorf("expiry-warning = %v, want 15m", cfg.opts.ExpiryWarning)
	}
}

func TestParseFlagsPlainMetricsOnLoopback(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:8080", "[::1]:8080", "localhost:8080", "0"} {
		if _, err := parseFlags([]string{"--metrics-secure=false", "--metrics-bind-address=" + addr}, io.Discard); err != nil {
			t.Errorf("plain HTTP metrics on %s: %v", addr, err)
		}
	}
}

func TestParseFlagsNoLimit(t *testing.T) {
	// Any negative QPS means no client-side limit, as in client-go.
	cfg, err := parseFlags([]string{"--kube-api-qps=-5"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.qps != manager.NoClientRateLimit {
		t.Errorf("qps = %v, want %v", cfg.qps, manager.NoClientRateLimit)
	}
}

func TestSetClientRateLimit(t *testing.T) {
	cfg := &rest.Config{QPS: 20, Burst: 30, RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter()}
	manager.SetClientRateLimit(cfg, -1, 1000)
	if cfg.QPS >= 0 || cfg.RateLimiter != nil {
		t.Errorf("no limit: QPS %v, RateLimiter %v; want a negative QPS (client-go then builds no token bucket) and none", cfg.QPS, cfg.RateLimiter)
	}
	manager.SetClientRateLimit(cfg, 50, 100)
	if cfg.QPS != 50 || cfg.Burst != 100 {
		t.Errorf("limit: QPS/burst %v/%d, want 50/100", cfg.QPS, cfg.Burst)
	}
}

func TestCheckServingCert(t *testing.T) {
	cfg, err := parseFlags([]string{"--webhook-cert-dir=" + t.TempDir()}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	err = checkServingCert(cfg.opts)
	if err == nil || !strings.Contains(err.Error(), "the escalation guard (--webhook-port=9443) needs its serving certificate") {
		t.Errorf("missing certificate: %v", err)
	}
	cfg.opts.WebhookPort = 0
	if err := checkServingCert(cfg.opts); err != nil {
		t.Errorf("with the guard off no certificate is needed: %v", err)
	}
}

func TestParseFlagsValid(t *testing.T) {
	cfg, err := parseFlags([]string{"--default-rbac-mode=Legacy", "--kube-api-qps=50", "--kube-api-burst=100",
		"--max-concurrent-reconciles=3", "--leader-elect", "--zap-log-level=debug"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.opts.DefaultRBACMode != oriav1alpha1.RBACModeLegacy || cfg.qps != 50 || cfg.burst != 100 ||
		cfg.opts.MaxConcurrentReconciles != 3 || !cfg.opts.LeaderElection {
		t.Errorf("unexpected config %+v", cfg)
	}
}

func TestParseFlagsInvalid(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--default-rbac-mode=legacy"}, `invalid --default-rbac-mode "legacy": must be one of Legacy, FineGrained, Unmanaged`},
		{[]string{"--default-rbac-mode="}, "invalid --default-rbac-mode"},
		{[]string{"--kube-api-qps=0"}, "invalid --kube-api-qps 0: must be greater than 0, or -1 for no client-side limit"},
		{[]string{"--kube-api-burst=0"}, "invalid --kube-api-burst 0"},
		{[]string{"--max-concurrent-reconciles=-1"}, "invalid --max-concurrent-reconciles -1"},
		{[]string{"--webhook-port=-1"}, "invalid --webhook-port -1: must be a port number, or 0 to disable the escalation guard"},
		{[]string{"--kube-api-burst=lots"}, "invalid value"},
		{[]string{"--no-such-flag"}, "flag provided but not defined"},
		{[]string{"--metrics-secure=false"}, `invalid --metrics-bind-address ":8443" with --metrics-secure=false`},
		{[]string{"--metrics-secure=false", "--metrics-bind-address=0.0.0.0:8080"}, "loopback address only"},
		{[]string{"extra"}, "unexpected arguments: extra"},
		{[]string{"--expiry-warning=-1m"}, "invalid --expiry-warning -1m0s: must be a duration of 0 or more"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := parseFlags(tc.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("parseFlags(%v) error = %v, want it to contain %q", tc.args, err, tc.want)
			}
		})
	}
}

func TestParseFlagsCertManagement(t *testing.T) {
	cfg, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// External by default: `make run`, the local cluster and the tests
	// provide the certificate; config/default sets internal.
	if cfg.opts.CertManagement != servingcert.External {
		t.Errorf("default --cert-management = %q, want external", cfg.opts.CertManagement)
	}
	if c := cfg.opts.Certificates; c.SecretName != servingcert.DefaultSecretName || c.ServiceName != servingcert.DefaultServiceName ||
		c.WebhookConfigurationName != servingcert.DefaultWebhookConfigurationName {
		t.Errorf("default certificate names: %+v", c)
	}
	cfg, err = parseFlags([]string{"--cert-management=internal", "--webhook-secret-name=s", "--webhook-service-name=svc", "--webhook-configuration-name=hook"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.opts.Certificates; cfg.opts.CertManagement != servingcert.Internal || c.SecretName != "s" || c.ServiceName != "svc" || c.WebhookConfigurationName != "hook" {
		t.Errorf("internal: %q %+v", cfg.opts.CertManagement, c)
	}
	// Internal: no certificate is needed up front.
	cfg.opts.WebhookCertDir = t.TempDir()
	if err := checkServingCert(cfg.opts); err != nil {
		t.Errorf("internal certificate management needs no certificate up front: %v", err)
	}
	if _, err := parseFlags([]string{"--cert-management=cert-manager"}, io.Discard); err == nil || !strings.Contains(err.Error(), `invalid --cert-management "cert-manager"`) {
		t.Errorf("an invalid --cert-management: %v", err)
	}
}

// TestAddressesAvoidKubectlDefault: neither oria's default addresses nor
// those make run gives it (RUN_METRICS_ADDRESS, RUN_PROBE_ADDRESS in the
// Makefile) are port 8080, where kubectl without a kubeconfig sends its
// requests: a fresh terminal would otherwise talk to oria's metrics server.
func TestAddressesAvoidKubectlDefault(t *testing.T) {
	cfg, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	addrs := map[string]string{"--metrics-bind-address": cfg.opts.MetricsBindAddress, "--health-probe-bind-address": cfg.opts.HealthProbeBindAddress}
	makefile, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"RUN_METRICS_ADDRESS", "RUN_PROBE_ADDRESS"} {
		m := regexp.MustCompile(`(?m)^` + name + ` \?= (\S+)$`).FindSubmatch(makefile)
		if m == nil {
			t.Fatalf("the Makefile sets no %s", name)
		}
		addrs["make run's "+name] = string(m[1])
	}
	if !bytes.Contains(makefile, []byte("--metrics-bind-address=$(RUN_METRICS_ADDRESS)")) || !bytes.Contains(makefile, []byte("--health-probe-bind-address=$(RUN_PROBE_ADDRESS)")) {
		t.Error("make run does not pass RUN_METRICS_ADDRESS and RUN_PROBE_ADDRESS to oria")
	}
	for what, addr := range addrs {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Errorf("%s %q: %v", what, addr, err)
			continue
		}
		if port == "8080" {
			t.Errorf("%s is %s: kubectl's default server is localhost:8080", what, addr)
		}
	}
}
