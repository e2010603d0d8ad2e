package main

import (
	"io"
	"testing"
	"time"

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

// TestExpiryTargets: no write while waiting; binding and revocation p99
// under a second for 100 grants; the large grant's last RoleBinding within
// a second of its floor from 2,000 namespaces up (not applicable below,
// nor without a floor).
func TestExpiryTargets(t *testing.T) {
	lat := func(p50, p99, max float64) *Latency { return &Latency{Count: 100, P50: p50, P99: p99, Max: max} }
	r := &Report{Config: Sizes{ExpiryGrants: 100, ExpiryNamespaces: 2000, ExpiryWaitSeconds: 30}, Results: []*Result{
		{Name: scenarioNotBefore, Converged: true, Latency: lat(0.1, 0.4, 0.5)},
		{Name: scenarioNotBeforeLarge, Converged: true, Latency: lat(1, 2, 2.5), Seconds: 2.5, FloorSeconds: 1.6},
		{Name: scenarioExpiryWait, Converged: true},
		{Name: scenarioExpiry, Converged: true, Latency: lat(0.05, 0.2, 0.3)},
		{Name: scenarioExpiryLarge, Converged: true, Latency: lat(0.4, 2.5, 2.7), Seconds: 2.7, FloorSeconds: 1.6},
	}}
	r.evaluate()
	want := map[string]string{
		"notbefore: first RoleBinding after notBefore, p99 of 100 grants":               "400ms PASS",
		"notbefore-large: the last of 2000 RoleBindings of one grant after notBefore":   "2.50s: floor 1.60s + 900ms (1.56x) PASS",
		"expiry-wait writes (30s, 101 grants expiring in 1h)":                           "0 PASS",
		"expiry: revocation after expiresAt, p99 of 100 grants":                         "200ms PASS",
		"expiry-large: the last of 2000 RoleBindings of one grant gone after expiresAt": "2.70s: floor 1.60s + 1.10s (1.69x) FAIL",
	}
	if d := cmp.Diff(want, targets(r)); d != "" {
		t.Errorf("targets (-want +got):\n%s", d)
	}
	r.Config.ExpiryNamespaces, r.Config.ExpiryGrants = 200, 10
	r.Results[1].FloorSeconds = 0
	r.Results[2].WritesTotal = 3
	r.Results[3].Converged = false
	r.Results[4].Seconds = 0.9
	r.evaluate()
	want = map[string]string{
		"notbefore: first RoleBinding after notBefore, p99 of 10 grants":               "400ms n/a",
		"notbefore-large: the last of 200 RoleBindings of one grant after notBefore":   "2.50s (no floor) n/a",
		"expiry-wait writes (30s, 11 grants expiring in 1h)":                           "3 FAIL",
		"expiry: revocation after expiresAt, p99 of 10 grants":                         "not measured FAIL",
		"expiry-large: the last of 200 RoleBindings of one grant gone after expiresAt": "900ms: floor 1.60s - 700ms (0.56x) n/a",
	}
	if d := cmp.Diff(want, targets(r)); d != "" {
		t.Errorf("targets, small sizes (-want +got):\n%s", d)
	}
}

// TestGrantLatencies: each small grant's first event after the instant,
// every event of the large grant; an event before the instant is the
// row's error.
func TestGrantLatencies(t *testing.T) {
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	ms := func(d ...int) []time.Time {
		var out []time.Time
		for _, x := range d {
			out = append(out, at.Add(time.Duration(x)*time.Millisecond))
		}
		return out
	}
	type row struct {
		Converged            bool
		Error                string
		Seconds, First       float64
		Count                int
		P50, P99, LatencyMax float64
	}
	rowOf := func(r *Result) row {
		return row{r.Converged, r.Error, r.Seconds, r.FirstSeconds, r.Latency.Count, r.Latency.P50, r.Latency.P99, r.Latency.Max}
	}
	for _, tc := range []struct {
		name             string
		times            map[string][]time.Time
		wantSmall, large row
	}{{
		name:      "after the instant",
		times:     map[string][]time.Time{"a": ms(300, 100), "b": ms(200), "big": ms(50, 900, 400)},
		wantSmall: row{true, "", 0.2, 0.1, 2, 0.1, 0.2, 0.2},
		large:     row{true, "", 0.9, 0.05, 3, 0.4, 0.9, 0.9},
	}, {
		name:      "one before it",
		times:     map[string][]time.Time{"a": ms(-20), "b": ms(200), "big": ms(100)},
		wantSmall: row{false, "a RoleBinding was seen 20ms before the instant", 0.2, -0.02, 2, -0.02, 0.2, 0.2},
		large:     row{true, "", 0.1, 0.1, 1, 0.1, 0.1, 0.1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rs, rl := &Result{}, &Result{}
			grantLatencies(rs, rl, func(v string) []time.Time { return tc.times[v] }, "big", []string{"a", "b"}, at)
			if d := cmp.Diff(tc.wantSmall, rowOf(rs)); d != "" {
				t.Errorf("small grants (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.large, rowOf(rl)); d != "" {
				t.Errorf("large grant (-want +got):\n%s", d)
			}
		})
	}
}

func TestInstancesSelector(t *testing.T) {
	if got, want := instancesSelector([]string{"a", "b"}), "oria.operatorframework.io/scope-instance in (a,b)"; got != want {
		t.Errorf("instancesSelector = %q, want %q", got, want)
	}
}
