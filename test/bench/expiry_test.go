package main

import (
	"io"
	"strings"
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
// under a second for 100 grants; the gated grant's access (gate watch and
// SubjectAccessReviews) within a second of the instant from 1,000
// namespaces up, its bindings shown, not judged.
func TestExpiryTargets(t *testing.T) {
	lat := func(p50, p99, max float64) *Latency { return &Latency{Count: 100, P50: p50, P99: p99, Max: max} }
	sar := func(max float64) *Latency { return &Latency{Count: 20, P50: max / 2, P99: max, Max: max} }
	r := &Report{Config: Sizes{ExpiryGrants: 100, ExpiryNamespaces: 2000, ExpiryWaitSeconds: 30}, Results: []*Result{
		{Name: scenarioNotBefore, Converged: true, Latency: lat(0.1, 0.4, 0.5)},
		{Name: scenarioNotBeforeLarge, Converged: true, Seconds: 0.12, Latency: sar(0.13), Gate: &GateFigures{BindingsSeconds: -120, FloorSeconds: 1.6}},
		{Name: scenarioExpiryWait, Converged: true},
		{Name: scenarioExpiry, Converged: true, Latency: lat(0.05, 0.2, 0.3)},
		{Name: scenarioExpiryLarge, Converged: true, Seconds: 0.9, Latency: sar(1.2), Gate: &GateFigures{BindingsSeconds: 2.7, FloorSeconds: 1.6}},
	}}
	r.evaluate()
	want := map[string]string{
		"notbefore: first RoleBinding after notBefore, p99 of 100 grants":                    "400ms PASS",
		"notbefore-large: access starts after notBefore, one gated grant of 2000 namespaces": "gate filled 120ms, SubjectAccessReviews allowed (20 namespaces) 130ms; bindings made while pending, the last 120s before (floor 1.60s) PASS",
		"expiry-wait writes (30s, 101 grants expiring in 1h)":                                "0 PASS",
		"expiry: revocation after expiresAt, p99 of 100 grants":                              "200ms PASS",
		"expiry-large: access ends after expiresAt, one gated grant of 2000 namespaces":      "gate emptied 900ms, SubjectAccessReviews denied (20 namespaces) 1.20s; bindings cleaned up after 2.70s (floor 1.60s) FAIL",
	}
	if d := cmp.Diff(want, targets(r)); d != "" {
		t.Errorf("targets (-want +got):\n%s", d)
	}
	r.Config.ExpiryNamespaces, r.Config.ExpiryGrants = 200, 10
	r.Results[1].Gate.FloorSeconds = 0
	r.Results[1].Seconds = 1.5
	r.Results[2].WritesTotal = 3
	r.Results[3].Converged = false
	r.Results[4].Latency = &Latency{}
	r.Results[4].Seconds = 0.3
	r.evaluate()
	want = map[string]string{
		"notbefore: first RoleBinding after notBefore, p99 of 10 grants":                    "400ms n/a",
		"notbefore-large: access starts after notBefore, one gated grant of 200 namespaces": "gate filled 1.50s, SubjectAccessReviews allowed (20 namespaces) 130ms; bindings made while pending, the last 120s before n/a",
		"expiry-wait writes (30s, 11 grants expiring in 1h)":                                "3 FAIL",
		"expiry: revocation after expiresAt, p99 of 10 grants":                              "not measured FAIL",
		"expiry-large: access ends after expiresAt, one gated grant of 200 namespaces":      "gate emptied 300ms, no SubjectAccessReview; bindings cleaned up after 2.70s (floor 1.60s) n/a",
	}
	if d := cmp.Diff(want, targets(r)); d != "" {
		t.Errorf("targets, small sizes (-want +got):\n%s", d)
	}
	r.Config.ExpiryNamespaces = 1000
	r.Results[4].Converged, r.Results[4].Error = false, "the gate was seen filled 20ms before the instant"
	r.evaluate()
	if got := targets(r)["expiry-large: access ends after expiresAt, one gated grant of 1000 namespaces"]; got != "not measured FAIL" {
		t.Errorf("a large row not converged: %q, want not measured FAIL", got)
	}
	if got := targets(r)["notbefore-large: access starts after notBefore, one gated grant of 1000 namespaces"]; !strings.HasSuffix(got, " FAIL") {
		t.Errorf("access started 1.5s after notBefore at 1,000 namespaces: %q, want FAIL", got)
	}
}

// TestSmallLatencies: each small grant's first event after the instant;
// an event before the instant is the row's error.
func TestSmallLatencies(t *testing.T) {
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
	for _, tc := range []struct {
		name  string
		times map[string][]time.Time
		want  row
	}{{
		name:  "after the instant",
		times: map[string][]time.Time{"a": ms(300, 100), "b": ms(200), "big": ms(-50)},
		want:  row{true, "", 0.2, 0.1, 2, 0.1, 0.2, 0.2},
	}, {
		name:  "one before it",
		times: map[string][]time.Time{"a": ms(-20), "b": ms(200)},
		want:  row{false, "a RoleBinding was seen 20ms before the instant", 0.2, -0.02, 2, -0.02, 0.2, 0.2},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Result{}
			smallLatencies(r, func(v string) []time.Time { return tc.times[v] }, []string{"a", "b"}, at)
			got := row{r.Converged, r.Error, r.Seconds, r.FirstSeconds, r.Latency.Count, r.Latency.P50, r.Latency.P99, r.Latency.Max}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestInstancesSelector(t *testing.T) {
	if got, want := instancesSelector([]string{"a", "b"}), "oria.operatorframework.io/scope-instance in (a,b)"; got != want {
		t.Errorf("instancesSelector = %q, want %q", got, want)
	}
}
