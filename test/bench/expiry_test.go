package main

import (
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExpiryFlags(t *testing.T) {
	c, err := parseFlags(nil, io.Discard)
	if err != nil || c.expiryGrants != 100 || c.expiryNamespaces != 2000 || c.expiryWaitSeconds != 30 {
		t.Errorf("expiry defaults = %d, %d, %ds (%v), want 100, 2000, 30s", c.expiryGrants, c.expiryNamespaces, c.expiryWaitSeconds, err)
	}
	c, err = parseFlags([]string{"-quick", "-scenarios=expiry"}, io.Discard)
	if err != nil || c.expiryNamespaces != 200 || c.expiryWaitSeconds != 10 || len(c.scenarios) != 1 || c.scenarios[0] != scenarioExpiry {
		t.Errorf("-quick -scenarios=expiry: %+v, %v", c, err)
	}
	for _, bad := range [][]string{{"-expiry-grants=0"}, {"-expiry-namespaces=0"}, {"-expiry-wait-seconds=-1"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%v): want an error", bad)
		}
	}
}

// TestExpiryTargets: no write while waiting; revocation p99 under a second
// for 100 grants, and the large grant's last RoleBinding under a second
// from 2,000 namespaces up (not applicable below).
func TestExpiryTargets(t *testing.T) {
	lat := func(p50, p99, max float64) *Latency { return &Latency{Count: 100, P50: p50, P99: p99, Max: max} }
	r := &Report{Config: Sizes{ExpiryGrants: 100, ExpiryNamespaces: 2000, ExpiryWaitSeconds: 30}, Results: []*Result{
		{Name: scenarioExpiryWait, Converged: true},
		{Name: scenarioExpiry, Converged: true, Latency: lat(0.05, 0.2, 0.3)},
		{Name: scenarioExpiryLarge, Converged: true, Latency: lat(0.4, 1.1, 1.2)},
	}}
	r.evaluate()
	want := map[string]string{
		"expiry-wait writes (30s, 101 grants expiring in 1h)":                           "0 PASS",
		"expiry: revocation after expiresAt, p99 of 100 grants":                         "200ms PASS",
		"expiry-large: the last of 2000 RoleBindings of one grant gone after expiresAt": "1.20s FAIL",
	}
	if d := cmp.Diff(want, targets(r)); d != "" {
		t.Errorf("targets (-want +got):\n%s", d)
	}
	r.Config.ExpiryNamespaces, r.Config.ExpiryGrants = 200, 10
	r.Results[0].WritesTotal = 3
	r.Results[1].Converged = false
	r.evaluate()
	want = map[string]string{
		"expiry-wait writes (30s, 11 grants expiring in 1h)":                           "3 FAIL",
		"expiry: revocation after expiresAt, p99 of 10 grants":                         "not measured FAIL",
		"expiry-large: the last of 200 RoleBindings of one grant gone after expiresAt": "1.20s n/a",
	}
	if d := cmp.Diff(want, targets(r)); d != "" {
		t.Errorf("targets, small sizes (-want +got):\n%s", d)
	}
}

func TestInstancesSelector(t *testing.T) {
	if got, want := instancesSelector([]string{"a", "b"}), "oria.operatorframework.io/scope-instance in (a,b)"; got != want {
		t.Errorf("instancesSelector = %q, want %q", got, want)
	}
}
