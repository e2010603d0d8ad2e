package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// apiserver reaches the kube-apiserver's /debug/pprof (on by default, for
// cluster-admin): to collect its garbage before a timed phase, and, with
// -profile, to profile its CPU and allocations during the phases, floors
// included.
//
// Collecting garbage first matters when the API server's heap is large (1,000
// CRDs with 100 KB schemas make it gigabytes): a collection then costs it
// seconds of CPU, and whichever phase the collection falls into pays for the
// allocations of the phases before it (the floor, and the deletion of its
// objects, run just before oria's phase). After a collection at its start,
// a phase pays only for the collections its own allocations cause.
type apiserver struct {
	cs      kubernetes.Interface
	profile bool
	dir     string
	seconds int
	busy    chan struct{} // one CPU profile at a time
}

func newAPIServer(cfg *rest.Config, profile bool, dir string, seconds int) (*apiserver, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &apiserver{cs: cs, profile: profile, dir: dir, seconds: seconds, busy: make(chan struct{}, 1)}, nil
}

// collectGarbage runs a garbage collection in the API server and returns
// its heap profile, which then holds every allocation up to now (the
// difference of two of them, go tool pprof -base, is what the time between
// allocated).
func (a *apiserver) collectGarbage(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return a.cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/heap").Param("gc", "1").DoRaw(ctx)
}

// snapshot saves the API server's allocations up to now (with -profile)
// into apiserver-<name>-heap.pb.gz.
func (a *apiserver) snapshot(ctx context.Context, name string) {
	if !a.profile {
		return
	}
	if data, err := a.collectGarbage(ctx); err == nil {
		a.save(name+"-heap", data)
	}
}

// startCPUProfile profiles the next a.seconds in the background into
// apiserver-<name>-cpu.pb.gz (with -profile; skipped while another runs).
func (a *apiserver) startCPUProfile(ctx context.Context, name string) {
	if !a.profile {
		return
	}
	goAlone(a.busy, func() {
		ctx, cancel := context.WithTimeout(ctx, time.Duration(a.seconds+30)*time.Second)
		defer cancel()
		data, err := a.cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(a.seconds)).Timeout(time.Duration(a.seconds+20) * time.Second).DoRaw(ctx)
		if err == nil {
			a.save(name+"-cpu", data)
		}
	})
}

func (a *apiserver) save(name string, data []byte) {
	if err := os.MkdirAll(a.dir, 0o755); err == nil {
		_ = os.WriteFile(filepath.Join(a.dir, "apiserver-"+name+".pb.gz"), data, 0o644)
	}
}

// watchHealth is what the API server's watch cache did for one resource:
// watchers it closed because they did not keep up (each then comes back and
// has the events it missed replayed, or everything re-listed), and the init
// events it replayed to new or resumed watches.
type watchHealth struct {
	terminated, initEvents float64
}

func (w watchHealth) sub(earlier watchHealth) watchHealth {
	return watchHealth{terminated: w.terminated - earlier.terminated, initEvents: w.initEvents - earlier.initEvents}
}

func (w watchHealth) String() string {
	return fmt.Sprintf("%.0f watchers closed for being slow, %.0f init events replayed", w.terminated, w.initEvents)
}

// watchedResources are the resources whose watch health the log reports
// for each timed phase (their plurals).
var watchedResources = []string{"rolebindings", "clusterroles"}

// serverState is what one scrape of the API server's /metrics says about
// the conditions a phase runs in: its watch caches' counters and sizes (a
// watch cache keeps the recent events of its resource, up to its capacity,
// and grows it while events arrive faster than it drops them), and its
// heap.
type serverState struct {
	watch map[string]watchHealth
	// capacity is each watched resource's watch-cache capacity (events).
	capacity map[string]float64
	// heapInUse is the API server's Go heap in use, in bytes.
	heapInUse float64
}

// state scrapes the API server's /metrics once; nil if it cannot be read
// (watchSince then says "unknown").
func (a *apiserver) state(ctx context.Context) *serverState {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	data, err := a.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil
	}
	return parseServerState(string(data))
}

// parseServerState reads a serverState from the API server's metrics text
// (a metric with no samples counts as zero); nil when it does not parse.
func parseServerState(text string) *serverState {
	terminated, err := parseMetric(text, "apiserver_terminated_watchers_total")
	if err != nil {
		return nil
	}
	initEvents, err := parseMetric(text, "apiserver_init_events_total")
	if err != nil {
		return nil
	}
	st := &serverState{watch: map[string]watchHealth{}, capacity: map[string]float64{}}
	t, i := sumBy(terminated, "resource"), sumBy(initEvents, "resource")
	var c map[string]float64
	if capacity, err := parseMetric(text, "watch_cache_capacity"); err == nil {
		c = sumBy(capacity, "resource")
	}
	for _, r := range watchedResources {
		st.watch[r] = watchHealth{terminated: t[r], initEvents: i[r]}
		st.capacity[r] = c[r]
	}
	if heap, err := parseMetric(text, "go_memstats_heap_inuse_bytes"); err == nil {
		st.heapInUse = sum(heap)
	}
	return st
}

// String describes the conditions at a phase's start.
func (s *serverState) String() string {
	if s == nil {
		return "unknown"
	}
	parts := []string{fmt.Sprintf("heap in use %.0f MB", s.heapInUse/(1<<20))}
	for _, r := range watchedResources {
		parts = append(parts, fmt.Sprintf("%s watch cache %.0f events", r, s.capacity[r]))
	}
	return strings.Join(parts, ", ")
}

// watchSince describes the watch health since an earlier state, for the
// resources where something happened.
func (a *apiserver) watchSince(ctx context.Context, earlier *serverState) string {
	now := a.state(ctx)
	if now == nil || earlier == nil {
		return "unknown"
	}
	var parts []string
	for _, r := range watchedResources {
		if d := now.watch[r].sub(earlier.watch[r]); d != (watchHealth{}) {
			parts = append(parts, r+": "+d.String())
		}
	}
	if len(parts) == 0 {
		return "no watcher closed, no init events"
	}
	return strings.Join(parts, "; ")
}

// writes returns the API server's write requests so far, by verb and
// resource ("PATCH scopeinstances/status"), from apiserver_request_total; nil
// if they cannot be read. During the idle scenario nothing but oria writes,
// so what changed across it is what oria wrote.
func (a *apiserver) writes(ctx context.Context) map[string]float64 {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	data, err := a.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil
	}
	samples, err := parseMetric(string(data), "apiserver_request_total")
	if err != nil {
		return nil
	}
	out := map[string]float64{}
	for _, s := range samples {
		switch verb := s.Labels["verb"]; verb {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY", "CREATE", "UPDATE":
			res := s.Labels["resource"]
			if sub := s.Labels["subresource"]; sub != "" {
				res += "/" + sub
			}
			out[verb+" "+res] += s.Value
		}
	}
	return out
}

// writesSince says which writes were made since earlier (writes), or ""
// when there were none or they cannot be told.
func (a *apiserver) writesSince(ctx context.Context, earlier map[string]float64) string {
	now := a.writes(ctx)
	if now == nil || earlier == nil {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(now)) {
		if d := now[k] - earlier[k]; d > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, d))
		}
	}
	return strings.Join(parts, ", ")
}
