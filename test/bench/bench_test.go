package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		d := make([]time.Duration, len(v))
		for i, x := range v {
			d[i] = time.Duration(x) * time.Millisecond
		}
		return d
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100..1, unsorted
	}
	for _, tc := range []struct {
		name string
		d    []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", ms(7), 99, 7 * time.Millisecond},
		{"p50 of odd", ms(3, 1, 2), 50, 2 * time.Millisecond},
		{"p50 of even is the lower middle", ms(4, 1, 3, 2), 50, 2 * time.Millisecond},
		{"p99 of 100", ms(hundred...), 99, 99 * time.Millisecond},
		{"p100 is max", ms(hundred...), 100, 100 * time.Millisecond},
		{"p99 of 20 is max", ms(hundred[:20]...), 99, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := percentile(tc.d, tc.p); got != tc.want {
				t.Errorf("percentile(%v, %v) = %v, want %v", tc.d, tc.p, got, tc.want)
			}
		})
	}
}

const metricsText = `# HELP rest_client_requests_total Number of HTTP requests, partitioned by status code, method, and host.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:39111",method="GET"} 12
rest_client_requests_total{code="200",host="127.0.0.1:39111",method="PATCH"} 4000
rest_client_requests_total{code="201",host="127.0.0.1:39111",method="POST"} 3
rest_client_requests_total{code="409",host="127.0.0.1:39111",method="PATCH"} 2
rest_client_requests_total_other{method="PATCH"} 99
# TYPE workqueue_depth gauge
workqueue_depth{controller="scopeinstance",name="scopeinstance"} 0
workqueue_depth{controller="extension",name="weird \"quoted\", name\\"} 5
process_open_fds 11
`

func TestParseMetric(t *testing.T) {
	s, err := parseMetric(metricsText, "rest_client_requests_total")
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 4 {
		t.Fatalf("got %d samples, want 4 (the _other family must not match): %v", len(s), s)
	}
	got := requestCounts(sumBy(s, "method"))
	want := requestCounts{"GET": 12, "PATCH": 4002, "POST": 3}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("by method = %v, want %v", got, want)
	}

	depth, err := parseMetric(metricsText, "workqueue_depth")
	if err != nil {
		t.Fatal(err)
	}
	if sum(depth) != 5 || depth[1].Labels["name"] != `weird "quoted", name\` {
		t.Errorf("workqueue_depth = %+v", depth)
	}
	fds, err := parseMetric(metricsText, "process_open_fds")
	if err != nil || len(fds) != 1 || fds[0].Value != 11 {
		t.Errorf("unlabelled sample = %+v, %v", fds, err)
	}
	if _, err := parseMetric(`rest_client_requests_total{method="GET} 1`, "rest_client_requests_total"); err == nil {
		t.Error("unterminated label value: want an error")
	}
}

func TestMetricsScrape(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, metricsText) }))
	defer srv.Close()
	m := metrics{url: srv.URL, client: srv.Client()}
	req, err := m.requests(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := (requestCounts{"GET": 12, "PATCH": 4002, "POST": 3, conflictKey: 2}); !reflect.DeepEqual(req, want) {
		t.Errorf("requests = %v, want %v", req, want)
	}
	if busy, err := m.busy(context.Background()); err != nil || !busy {
		t.Errorf("busy = %v, %v; want true (a queue of depth 5)", busy, err)
	}
}

func TestRequestCountsWrites(t *testing.T) {
	before := requestCounts{"GET": 10, "PATCH": 5}
	after := requestCounts{"GET": 30, "PATCH": 9, "POST": 1, "DELETE": 2}
	byVerb, total := after.sub(before).writes()
	if total != 7 || !reflect.DeepEqual(byVerb, map[string]int{"POST": 1, "PUT": 0, "PATCH": 4, "DELETE": 2}) {
		t.Errorf("writes = %v, %d", byVerb, total)
	}
	if _, total := (requestCounts{"GET": 100}).writes(); total != 0 {
		t.Errorf("reads counted as writes: %d", total)
	}
}

func TestProcParsing(t *testing.T) {
	// The command name may hold spaces and parentheses.
	stat := "4242 (ori a) (x)) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 130 0 0 20 0 12 0 900 1000000 5000 18446744073709551615"
	cpu, err := parseStatCPU(stat)
	if err != nil || cpu != 3.8 {
		t.Errorf("parseStatCPU = %v, %v; want 3.8", cpu, err)
	}
	if _, err := parseStatCPU("4242 (oria) S 1 2"); err == nil {
		t.Error("short stat: want an error")
	}
	status := "Name:\toria\nVmHWM:\t   81234 kB\nVmRSS:\t   70000 kB\n"
	if rss, err := parseStatusKB(status, "VmRSS"); err != nil || rss != 70000*1024 {
		t.Errorf("VmRSS = %d, %v", rss, err)
	}
	if _, err := parseStatusKB(status, "VmSwap"); err == nil {
		t.Error("missing key: want an error")
	}
}

func sampleReport() *Report {
	return &Report{
		Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Host:    Host{CPUs: 2, Commit: "abc1234"},
		Config: Sizes{Extensions: 200, CRDsPerExtension: 5, Namespaces: 2000, NewNamespaces: 100, ScaleInstances: 10, ScaleNamespaces: 5000,
			GuardNamespaces: 100, GuardWrites: 50, IdleSeconds: 120, QPS: 500, Burst: 1000, FloorWorkers: 32},
		PeakRSS: 90 << 20,
		Results: []*Result{
			{Name: scenarioExtensions, Objects: 4000, Converged: true, Seconds: 9, FirstSeconds: 0.25, FloorSeconds: 7.5, QPSFloorSeconds: 6, Reads: 4001, Conflicts: 7,
				Writes: map[string]int{"PATCH": 4200}, WritesTotal: 4200, PeakRSS: 80 << 20, CPUSeconds: 4.2, ControlPlaneCPUSeconds: 9, FloorControlPlaneCPUSeconds: 3, FloorCPUSeconds: 1.5},
			{Name: scenarioFanout, Objects: 2000, Converged: true, Seconds: 5, FloorSeconds: 2, WritesTotal: 2001},
			{Name: scenarioNewNamespaces, Objects: 100, Converged: true, Latency: &Latency{Count: 100, P50: 0.05, P99: 0.09, Max: 0.6}},
			{Name: scenarioScale, Objects: 50000, Converged: true, Seconds: 30, FloorSeconds: 25, PeakRSS: 210 << 20},
			{Name: scenarioIdle, Converged: true, WritesTotal: 0, Reads: 3},
		},
	}
}

func targets(r *Report) map[string]string {
	got := map[string]string{}
	for _, tg := range r.Targets {
		got[tg.Name] = tg.Got + " " + tg.verdict()
	}
	return got
}

func TestEvaluate(t *testing.T) {
	r := sampleReport()
	r.evaluate()
	want := map[string]string{
		"extensions convergence / floor (no client limit)": "1.20 PASS", // 9 / 7.5; the QPS floor does not count
		"fanout convergence / floor (no client limit)":     "2.50 FAIL",
		"scale convergence / floor (no client limit)":      "1.20 PASS",
		"extensions reads (GET)":                           "4001 FAIL",
		"new-namespace p99 (N=2000)":                       "90ms PASS",
		"idle writes (120s)":                               "0 PASS",
		targetRSSLabel:                                     "90 MB n/a", // N=2000 < 5000
		"scale peak RSS (50000 RoleBindings)":              "210 MB FAIL",
	}
	if got := targets(r); !reflect.DeepEqual(got, want) {
		t.Errorf("targets = %v, want %v", got, want)
	}
	if n := r.failedTargets(); n != 3 {
		t.Errorf("failedTargets = %d, want 3", n)
	}

	r.Config.Namespaces = 5000
	r.Results[1].Seconds, r.Results[1].FloorSeconds = 0.5, 0.2 // -quick sizes
	r.Results[2].Latency.P99 = 0.1
	r.Results[3].Objects, r.Results[3].FloorSeconds = 5000, 0
	r.Results[4].WritesTotal = 2
	r.Results[0].Converged = false
	r.evaluate()
	got := targets(r)
	for name, want := range map[string]string{
		targetRSSLabel:       "90 MB PASS",
		"idle writes (120s)": "2 FAIL",
		"fanout convergence / floor (no client limit)":     "2.50 (floor < 1s) n/a",
		"extensions convergence / floor (no client limit)": "did not converge FAIL",
		"extensions reads (GET)":                           "did not converge FAIL",
		"new-namespace p99 (N=5000)":                       "100ms FAIL",
		"scale convergence / floor (no client limit)":      "no floor n/a",
		"scale peak RSS (5000 RoleBindings)":               "210 MB n/a", // below 50,000
	} {
		if got[name] != want {
			t.Errorf("target %q = %q, want %q", name, got[name], want)
		}
	}
	if r.converged() {
		t.Error("converged() with a scenario that timed out")
	}

	// A scale-only run: the memory target of scenarios 1 and 2 is not shown.
	r.Results = r.Results[3:4]
	r.evaluate()
	if got := targets(r); len(got) != 2 || got[targetRSSLabel] != "" {
		t.Errorf("scale-only targets = %v", got)
	}
}

func TestRender(t *testing.T) {
	r := sampleReport()
	r.Results[1].Converged = false
	r.Results[1].Error = "1999 of 2000 objects after 10m0s: context deadline exceeded"
	r.evaluate()
	var b bytes.Buffer
	if err := r.render(&b); err != nil {
		t.Fatal(err)
	}
	out := strings.Join(strings.Fields(b.String()), " ") // columns' widths vary
	for _, want := range []string{
		"200 extensions x 5 CRDs, 2000 namespaces (+100 new), scale 10 x 5000, guard 100 namespaces x 50 writes, expiry 0 grants + 1 of 0 namespaces (wait 0s), idle 120s; oria's client: qps 500, burst 1000; floor: 32 workers, create",
		"9.00s 250ms 7.50s 1.20 6.00s 1.50", // extensions: oria, first, floor, ratio, floor@qps, ratio@qps
		"4200 (PATCH 4200; 7 got 409) 4001", "80 MB", "4.2s (floor 1.5s) 9.0s (floor 3.0s)",
		"TIMEOUT", "fanout: 1999 of 2000",
		"50ms", "90ms", "600ms",
		"extensions convergence / floor (no client limit) <= 1.25 1.20 PASS",
		"PASS", "FAIL", "n/a",
		"floor: a plain client without a client-side limit, timed cold;", "(-repeat 0; scale: 1)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	r.Config.QPS = -1
	b.Reset()
	if err := r.render(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "oria's client: no client-side limit") {
		t.Errorf("no-limit header missing:\n%s", b.String())
	}
}

func TestSave(t *testing.T) {
	dir := t.TempDir()
	path, err := sampleReport().save(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(path, "results-20260102T030405Z.json") {
		t.Errorf("path = %s", path)
	}
}

func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{"-quick", "-namespaces=50", "-scenarios=idle,fanout"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.extensions != 20 || c.crds != 5 || c.namespaces != 50 || c.newNamespaces != 20 || c.idleSeconds != 15 || c.scaleNamespaces != 500 {
		t.Errorf("quick sizes = %d %d %d %d %d %d", c.extensions, c.crds, c.namespaces, c.newNamespaces, c.idleSeconds, c.scaleNamespaces)
	}
	// Scenarios run in their fixed order, idle last; oria keeps its own
	// defaults (no client-side limit) unless -qps or -burst is given.
	if !reflect.DeepEqual(c.scenarios, []string{scenarioFanout, scenarioIdle}) || c.qps != -1 || c.oriaLimit {
		t.Errorf("scenarios %v qps %v oriaLimit %v", c.scenarios, c.qps, c.oriaLimit)
	}
	c, err = parseFlags(nil, io.Discard)
	if err != nil || c.extensions != 200 || c.namespaces != 2000 || c.scaleInstances != 10 || c.scaleNamespaces != 5000 ||
		!reflect.DeepEqual(c.scenarios, []string{scenarioExtensions, scenarioFanout, scenarioFanoutPublish, scenarioExpiry, scenarioIdle}) ||
		c.repeat != 5 || !c.floorWarmup {
		t.Errorf("defaults = %+v, %v", c, err)
	}
	c, err = parseFlags([]string{"-repeat=1", "-floor-warmup=false"}, io.Discard)
	if err != nil || c.repeat != 1 || c.floorWarmup {
		t.Errorf("-repeat=1 -floor-warmup=false: %+v, %v", c, err)
	}
	if c.guardNamespaces != 100 || c.guardWrites != 50 {
		t.Errorf("guard sizes = %d x %d, want 100 x 50", c.guardNamespaces, c.guardWrites)
	}
	c, err = parseFlags([]string{"-scenarios=idle,guard", "-guard-writes=60"}, io.Discard)
	if err != nil || !reflect.DeepEqual(c.scenarios, []string{scenarioGuard, scenarioIdle}) || c.guardWrites != 60 {
		t.Errorf("-scenarios=idle,guard: %+v, %v", c, err)
	}
	c, err = parseFlags([]string{"-qps=500", "-scenarios=scale,all"}, io.Discard)
	if err != nil || c.qps != 500 || c.burst != 1000 || !c.oriaLimit ||
		!reflect.DeepEqual(c.scenarios, []string{scenarioExtensions, scenarioFanout, scenarioFanoutPublish, scenarioScale, scenarioExpiry, scenarioIdle}) {
		t.Errorf("-qps=500 -scenarios=scale,all: %+v, %v", c, err)
	}
	for _, bad := range [][]string{{"-scenarios=nope"}, {"-extensions=0"}, {"-qps=0"}, {"-scale-instances=0"}, {"-repeat=0"}, {"-guard-writes=0"}, {"-guard-namespaces=0"}, {"extra"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%v): want an error", bad)
		}
	}
}

func TestSpread(t *testing.T) {
	s := newSpread("bench-scale", 3, 10)
	if s.bindings() != 30 || s.namespaces[2] != "bench-scale-00002" || s.instances[9] != "bench-scale-09" || s.role != "bench-scale-reader" {
		t.Errorf("spread = %+v", s)
	}
	if !strings.HasPrefix(s.instanceSelector(), "oria.operatorframework.io/scope-instance in (bench-scale-00,bench-scale-01,") {
		t.Errorf("selector = %s", s.instanceSelector())
	}
	if one := newSpread("bench-fanout", 2, 1); one.instances[0] != "bench-fanout" || one.bindings() != 2 {
		t.Errorf("one-instance spread = %+v", one)
	}
}

func TestBenchCRDs(t *testing.T) {
	crds := benchCRDs(3, 2)
	if len(crds) != 6 || crds[0].String() != "widget0s.ext000.bench.oria.example.com" || crds[5].extension != "bench-ext-002" || crds[5].kind != "Widget1" {
		t.Errorf("benchCRDs = %v", crds)
	}
}

func TestBigSchema(t *testing.T) {
	a, err := bigSchema(100 << 10).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := bigSchema(100 << 10).Marshal()
	if !bytes.Equal(a, b) {
		t.Error("schema is not deterministic")
	}
	if n := len(a); n < 100<<10 || n > 110<<10 {
		t.Errorf("schema is %d bytes, want about 100 KB", n)
	}
}

func TestParallel(t *testing.T) {
	var n atomic.Int64
	if err := parallel(context.Background(), 4, 100, func(context.Context, int) error { n.Add(1); return nil }); err != nil || n.Load() != 100 {
		t.Errorf("ran %d of 100, err %v", n.Load(), err)
	}
	boom := errors.New("boom")
	err := parallel(context.Background(), 4, 1000, func(_ context.Context, i int) error {
		if i == 10 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom", err)
	}
}

func TestPublishTarget(t *testing.T) {
	fanout := &Result{Name: scenarioFanout, Converged: true, Seconds: 2, FloorSeconds: 1.5}
	for _, tc := range []struct {
		name string
		x, f *Result
		want string
	}{
		{"within", &Result{Converged: true, Seconds: 2.1}, fanout, "1.05 PASS"},
		{"slower", &Result{Converged: true, Seconds: 2.4}, fanout, "1.20 FAIL"},
		{"no fanout row", &Result{Converged: true, Seconds: 2.4}, nil, "no fanout row n/a"},
		{"did not converge", &Result{}, fanout, "did not converge FAIL"},
		{"quick sizes", &Result{Converged: true, Seconds: 0.6}, &Result{Converged: true, Seconds: 0.5, FloorSeconds: 0.2}, "1.20 (floor < 1s) n/a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "within" {
				tc.x.BindingsSeconds, tc.x.FloorSeconds = 2, 1.5
				if got, pass := publishOverhead(tc.x); got+" "+(Target{Pass: pass}).verdict() != "1.05 PASS" {
					t.Errorf("publishOverhead = %s", got)
				}
			}
			got, pass := publishTarget(tc.x, tc.f)
			if s := got + " " + (Target{Pass: pass}).verdict(); s != tc.want {
				t.Errorf("publishTarget = %q, want %q", s, tc.want)
			}
		})
	}
}

func TestWaitsSince(t *testing.T) {
	before := waits{"scopeinstance": {reconciles: 2, reconcileSeconds: 1, queued: 2, queuedSeconds: 0.5}}
	after := waits{
		"scopeinstance":         {reconciles: 6, reconcileSeconds: 3, queued: 6, queuedSeconds: 2.5},
		"clusterextension-rbac": {reconciles: 4, reconcileSeconds: 0.4, queued: 4, queuedSeconds: 0.04},
		"scopetemplate":         {reconciles: 1, reconcileSeconds: 1},
	}
	before["scopetemplate"] = &wait{reconciles: 1, reconcileSeconds: 1}
	got := after.since(before)
	want := "clusterextension-rbac 4 reconciles, mean 100ms, queued 10ms; scopeinstance 4 reconciles, mean 500ms, queued 500ms"
	if got != want {
		t.Errorf("since = %q, want %q", got, want)
	}
}
