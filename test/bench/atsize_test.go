package main

import (
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/operator-framework/oria/test/localcluster"
)

// TestDeploymentMemoryLimit: the limit of the manager container of the
// Deployment in a multi-document manifest, the shipped one included.
func TestDeploymentMemoryLimit(t *testing.T) {
	const deployment = `apiVersion: v1
kind: Namespace
metadata:
  name: oria-system
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: oria
spec:
  template:
    spec:
      containers:
      - name: sidecar
        resources:
          limits:
            memory: 64Mi
      - name: manager
        resources:
          limits:
            memory: %s
`
	for _, tc := range []struct {
		name, manifest string
		want           int64
		wantErr        bool
	}{
		{"512Mi", strings.Replace(deployment, "%s", "512Mi", 1), 512 << 20, false},
		{"1G", strings.Replace(deployment, "%s", "1G", 1), 1e9, false},
		{"no limit", strings.Replace(deployment, "memory: %s", "cpu: 100m", 1), 0, true},
		{"no Deployment", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := deploymentMemoryLimit([]byte(tc.manifest))
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("deploymentMemoryLimit = %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
	shipped := filepath.Join(localcluster.RepoRoot(), "config", "manager", "manager.yaml")
	if got, err := resolveMemoryLimit("shipped", shipped); err != nil || got <= 0 {
		t.Errorf("resolveMemoryLimit(shipped) = %d, %v; want config/manager's limit", got, err)
	}
	for value, want := range map[string]int64{"none": 0, "1Gi": 1 << 30, "768Mi": 768 << 20} {
		if got, err := resolveMemoryLimit(value, shipped); err != nil || got != want {
			t.Errorf("resolveMemoryLimit(%s) = %d, %v; want %d", value, got, err, want)
		}
	}
	for _, bad := range []string{"lots", "0", "-1Gi"} {
		if _, err := resolveMemoryLimit(bad, shipped); err == nil {
			t.Errorf("resolveMemoryLimit(%s) accepted", bad)
		}
	}
}

// TestAtSizeFlags: -quick shrinks the restart and sizing scenarios, flags
// given win, and nonsense is refused.
func TestAtSizeFlags(t *testing.T) {
	c, err := parseFlags([]string{"-quick", "-restart-policies=7", "-memory-limit=1Gi"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := AtSizes{ApplyFloor: true, ApplyFloorWorkers: 16, MemoryLimit: "1Gi", MemoryLimitBytes: 1 << 30,
		RestartInstances: 2, RestartNamespaces: 500, RestartExtensions: 50, RestartPolicies: 7, RestartRuns: 3,
		SizingExtensions: 50, SizingCRDs: 100, SizingBindings: 1000, SizingRBAC: 1000}
	if diff := cmp.Diff(want, c.at); diff != "" {
		t.Errorf("-quick (-want +got):\n%s", diff)
	}
	for _, bad := range [][]string{{"-restart-runs=0"}, {"-apply-floor-workers=0"}, {"-restart-extensions=0"}, {"-memory-limit=lots"}, {"-sizing-rbac=0"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if c, err := parseFlags([]string{"-scenarios=restart,sizing"}, io.Discard); err != nil || !cmp.Equal(c.scenarios, []string{scenarioRestart, scenarioSizing}) {
		t.Errorf("-scenarios=restart,sizing: %v, %v", c, err)
	}
}

// TestFinishRuns: a row of runs shows the median and the slowest time, the
// writes of all runs and the highest memory; it converged only when every
// run finished.
func TestFinishRuns(t *testing.T) {
	r := &Result{Runs: []RestartRun{
		{Seconds: 12, PeakRSS: 100},
		{Seconds: 20, Changes: map[string]int{"ScopeInstance": 2}, PeakRSS: 300},
		{Seconds: 15, EngineWrites: 1, PeakRSS: 200},
	}}
	finishRuns(r, 3)
	got := []float64{r.Seconds, r.Latency.P50, r.Latency.Max, float64(r.WritesTotal), float64(r.PeakRSS)}
	if diff := cmp.Diff([]float64{15, 15, 20, 3, 300}, got); diff != "" || !r.Converged {
		t.Errorf("seconds, p50, max, writes, peak (-want +got):\n%s; converged %v", diff, r.Converged)
	}
	finishRuns(r, 4)
	if r.Converged {
		t.Error("3 of 4 runs converged")
	}
}

// TestMergeRoundsApplyFloor: the floor from the apply is the median of its
// rounds, with that round's breakdown; oria's breakdown stays its median
// round's.
func TestMergeRoundsApplyFloor(t *testing.T) {
	round := func(oria, apply float64) *Result {
		return &Result{Converged: true, Seconds: oria, FloorSeconds: 1, ApplyFloorSeconds: apply,
			Breakdown: &Breakdown{Oria: &Phases{Last: oria}, ApplyFloor: &Phases{Last: apply}}}
	}
	r := &Result{Name: "fanout"}
	mergeRounds(r, []*Result{round(2.0, 1.4), round(1.8, 1.9), round(2.2, 1.5)})
	got := []float64{r.Seconds, r.ApplyFloorSeconds, r.Breakdown.Oria.Last, r.Breakdown.ApplyFloor.Last, r.Rounds[1].ApplyFloor}
	if diff := cmp.Diff([]float64{2.0, 1.5, 2.0, 1.5, 1.9}, got); diff != "" {
		t.Errorf("oria, apply floor, breakdowns, a round's apply floor (-want +got):\n%s", diff)
	}
}

// TestEvaluateAtSize: the fan-out rows against the floor from the apply,
// memory against the shipped limit, the restart rows' writes and times.
func TestEvaluateAtSize(t *testing.T) {
	r := &Report{Config: Sizes{AtSize: AtSizes{ApplyFloorWorkers: 16, MemoryLimit: "shipped", MemoryLimitBytes: 512 << 20, RestartRuns: 3,
		RestartExtensions: 1000, RestartPolicies: 2000}}}
	r.Results = []*Result{
		{Name: scenarioFanout, Converged: true, Seconds: 1.9, ApplyFloorSeconds: 1.4},
		{Name: scenarioScale, Converged: true, Objects: 250000, Seconds: 300, ApplyFloorSeconds: 250, PeakRSS: 480 << 20},
		{Name: scenarioRestart, Converged: true, Objects: 100000, Runs: make([]RestartRun, 3), Latency: &Latency{P50: 12, Max: 31}, PeakRSS: 200 << 20},
		{Name: scenarioTakeoverKill, Converged: true, Objects: 100000, Runs: make([]RestartRun, 3), Latency: &Latency{P50: 19, Max: 21}, WritesTotal: 4},
	}
	var got []string
	r.evaluateAtSize(func(name, want, g string, pass *bool) {
		got = append(got, name+" | "+want+" | "+g+" | "+Target{Pass: pass}.verdict())
	})
	want := []string{
		"fanout convergence / floor from the apply (16 workers, cold) | <= 1.25 | 1.36 | FAIL",
		"scale convergence / floor from the apply (16 workers, cold) | <= 1.25 | 1.20 | PASS",
		"scale peak RSS (250000 bindings) / oria's memory limit (shipped) | <= 90 % of 512 MiB = 461 MB | 480 MB (94 %) | FAIL",
		"restart peak RSS (100000 bindings) / oria's memory limit (shipped) | <= 90 % of 512 MiB = 461 MB | 200 MB (39 %) | PASS",
		"restart writes (3 runs: oria's engine, and API changes) | 0 | 0 | PASS",
		"restart: all reconciled, p50 / max of 3 runs (100000 bindings) | max < 30.00s | 12.00s / 31.00s | FAIL",
		"takeover-kill writes (3 runs: oria's engine, and API changes) | 0 | 4 | FAIL",
		"takeover-kill: all reconciled, p50 / max of 3 runs (100000 bindings) | measured | 19.00s / 21.00s | n/a",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
}

// TestRenderAtSize: the memory limit, both floors with where the time
// went, every restart run and the sizing rows are printed.
func TestRenderAtSize(t *testing.T) {
	r := &Report{Config: Sizes{AtSize: AtSizes{MemoryLimit: "shipped", MemoryLimitBytes: 512 << 20, GoMemLimitBytes: 461 << 20}}}
	r.Results = []*Result{
		{Name: scenarioFanout, Converged: true, Seconds: 1.9, FloorSeconds: 1.6, ApplyFloorSeconds: 1.4, Breakdown: &Breakdown{
			Oria:       &Phases{Admitted: 0.02, First: 0.05, Last: 1.9},
			ApplyFloor: &Phases{Admitted: 0.01, First: 0.03, Answered: 1.35, Last: 1.4},
		}},
		{Name: scenarioRestart, Converged: true, Runs: []RestartRun{{Seconds: 12.5, Stopped: 0.4, Ready: 3, PassSeconds: 8, PeakRSS: 150 << 20}}},
		{Name: "sizing-bindings", Converged: true, Sizing: &SizingStep{What: "RoleBinding", Added: 1000, HeapBytes: [3]int64{50 << 20, 52 << 20, 54 << 20}, RSSBytes: [3]int64{90 << 20, 95 << 20, 99 << 20}}},
	}
	var b strings.Builder
	if err := r.renderAtSize(&b); err != nil {
		t.Fatal(err)
	}
	out := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{
		"oria's memory limit: 512 MiB (-memory-limit=shipped), GOMEMLIMIT 461 MiB (90 %, as installed)",
		"fanout 1.90s 1.60s 1.19 1.40s 1.36 20ms / 50ms / 1.90s 10ms / 30ms / 1.35s / 1.40s",
		"restart 1 12.50s 400ms 3.00s 8.00s 0 0 150 MB",
		"sizing-bindings RoleBinding 1000 50 MB / 52 MB / 54 MB 2097 bytes 90 MB / 95 MB / 99 MB",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}

// TestFmtCounts: changes by resource, in order, only those that changed.
func TestFmtCounts(t *testing.T) {
	for _, tc := range []struct {
		in   map[string]int
		want string
	}{
		{nil, "0"},
		{map[string]int{"RoleBinding": 0}, "0"},
		{map[string]int{"ScopeInstance": 2, "Event": 1, "RoleBinding": 0}, "Event 1, ScopeInstance 2"},
	} {
		if got := fmtCounts(tc.in); got != tc.want {
			t.Errorf("fmtCounts(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestLeaderElectionEvents: the Events the leader election records on its
// Lease are shown but not counted as writes; any other Event is.
func TestLeaderElectionEvents(t *testing.T) {
	for _, tc := range []struct {
		namespace, name string
		want            bool
	}{
		{"kube-system", "oria.operatorframework.io.18eb9bc237a9e15c", true},
		{"kube-system", "bench-restart-00.18eb9bc237a9e15c", false},
		{"default", "oria.operatorframework.io.18eb9bc237a9e15c", false},
	} {
		if got := leaderElectionEvent(tc.namespace, tc.name); got != tc.want {
			t.Errorf("leaderElectionEvent(%s, %s) = %v, want %v", tc.namespace, tc.name, got, tc.want)
		}
	}
	counts := map[string]int{leaderElectionEvents: 1, "ScopeInstance": 2}
	if got := total(counts); got != 2 {
		t.Errorf("total(%v) = %d, want 2", counts, got)
	}
	if got := (RestartRun{EngineWrites: 1, Changes: counts}).writes(); got != 3 {
		t.Errorf("writes = %d, want 3", got)
	}
}
