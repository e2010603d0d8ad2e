package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/operator-framework/oria/internal/manager"
)

func TestSoftMemoryLimit(t *testing.T) {
	for name, tc := range map[string]struct {
		env     map[string]string
		want    int64
		wantErr bool
	}{
		"no limit given":              {},
		"90 % of the container's":     {env: map[string]string{envMemoryLimit: "536870912"}, want: 483183820},
		"GOMEMLIMIT wins":             {env: map[string]string{envMemoryLimit: "536870912", "GOMEMLIMIT": "100MiB"}},
		"no real limit (node's)":      {env: map[string]string{envMemoryLimit: "9223372036854775807"}},
		"not a number of bytes":       {env: map[string]string{envMemoryLimit: "512Mi"}, wantErr: true},
		"zero is not a limit":         {env: map[string]string{envMemoryLimit: "0"}, wantErr: true},
		"spaces around are tolerated": {env: map[string]string{envMemoryLimit: " 1000 "}, want: 900},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := softMemoryLimit(func(k string) string { return tc.env[k] })
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("limit = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestParseFlagsLeaderElection(t *testing.T) {
	cfg, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.opts.LeaseDuration != 15*time.Second || cfg.opts.RenewDeadline != 10*time.Second || cfg.opts.RetryPeriod != 2*time.Second {
		t.Errorf("lease %v, renew %v, retry %v; want controller-runtime's 15s, 10s, 2s", cfg.opts.LeaseDuration, cfg.opts.RenewDeadline, cfg.opts.RetryPeriod)
	}
	cfg, err = parseFlags([]string{"--leader-election-lease-duration=6s", "--leader-election-renew-deadline=4s", "--leader-election-retry-period=1s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.opts.LeaseDuration != 6*time.Second || cfg.opts.RenewDeadline != 4*time.Second || cfg.opts.RetryPeriod != time.Second {
		t.Errorf("flags not applied: %+v", cfg.opts)
	}
	for _, args := range [][]string{
		{"--leader-election-retry-period=0"},
		{"--leader-election-renew-deadline=2s"},                                        // not above 1.2 × 2 s
		{"--leader-election-lease-duration=10s"},                                       // not above the renew deadline
		{"--leader-election-lease-duration=5s", "--leader-election-renew-deadline=6s"}, // the same
	} {
		if _, err := parseFlags(args, io.Discard); err == nil || !strings.Contains(err.Error(), "leader-election") {
			t.Errorf("%v: err = %v, want an error naming the flag", args, err)
		}
	}
	if manager.DefaultLeaseDuration != 15*time.Second {
		t.Errorf("docs/operations.md states a 15 s default lease")
	}
}

func TestVersion(t *testing.T) {
	cfg, err := parseFlags([]string{"--version"}, io.Discard)
	if err != nil || !cfg.version {
		t.Fatalf("--version: %v, %+v", err, cfg)
	}
	defer func(v string) { version = v }(version)
	version = "v0.1.0"
	var b bytes.Buffer
	printVersion(&b)
	if !strings.HasPrefix(b.String(), "oria v0.1.0") {
		t.Errorf("printVersion = %q, want it to start with the stamped version", b.String())
	}
}

func TestPodNamespace(t *testing.T) {
	t.Setenv(envPodNamespace, "oria-system")
	if got := podNamespace(); got != "oria-system" {
		t.Errorf("podNamespace() = %q with POD_NAMESPACE set", got)
	}
}
