package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat. Linux fixes it
// at 100 for user space (USER_HZ), whatever the kernel's HZ.
const userHZ = 100

// parseStatCPU returns utime+stime in seconds from the text of
// /proc/<pid>/stat. The command name (field 2) may contain spaces and
// parentheses, so fields are counted from the last ')'.
func parseStatCPU(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat: no command name")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("malformed /proc stat: %d fields after the command name", len(f))
	}
	var ticks float64
	for _, s := range f[11:13] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed /proc stat time %q: %w", s, err)
		}
		ticks += float64(v)
	}
	return ticks / userHZ, nil
}

// parseStatusKB returns the value in bytes of a "<key>:   123 kB" line of
// /proc/<pid>/status.
func parseStatusKB(status, key string) (int64, error) {
	for line := range strings.Lines(status) {
		rest, ok := strings.CutPrefix(line, key+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("malformed %s line %q", key, strings.TrimSpace(line))
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed %s line %q: %w", key, strings.TrimSpace(line), err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no %s in /proc status", key)
}

func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

func procStatus(pid int, key string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseStatusKB(string(b), key)
}

// childPIDs returns the pids of this process's children whose command name
// is one of names (the control plane's etcd and kube-apiserver).
func childPIDs(names ...string) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var pids []int
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) || !slices.Contains(names, s[open+1:end]) {
			continue
		}
		if pid, err := strconv.Atoi(strings.Fields(s)[0]); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// sampler tracks the resident memory of a process between begin and end.
// The kernel's high-water mark (VmHWM) is reset at begin through
// /proc/<pid>/clear_refs, so the peak is exact; polling VmRSS backs it up
// where the reset is not allowed.
type sampler struct {
	pid int

	mu      sync.Mutex
	peak    int64 // bytes, since begin
	overall int64 // bytes, since start
	hwmOK   bool  // VmHWM was reset at begin
}

func newSampler(ctx context.Context, pid int, every time.Duration) *sampler {
	s := &sampler{pid: pid}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if rss, err := procStatus(pid, "VmRSS"); err == nil {
					s.observe(rss)
				}
			}
		}
	}()
	return s
}

func (s *sampler) observe(rss int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.peak = max(s.peak, rss)
	s.overall = max(s.overall, rss)
}

// begin starts a measurement window.
func (s *sampler) begin() {
	err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", s.pid), []byte("5"), 0)
	rss, _ := procStatus(s.pid, "VmRSS")
	s.mu.Lock()
	s.peak, s.hwmOK = rss, err == nil
	s.mu.Unlock()
}

// end returns the peak resident memory in bytes since begin.
func (s *sampler) end() int64 {
	if rss, err := procStatus(s.pid, "VmRSS"); err == nil {
		s.observe(rss)
	}
	s.mu.Lock()
	ok := s.hwmOK
	s.mu.Unlock()
	if ok {
		if hwm, err := procStatus(s.pid, "VmHWM"); err == nil {
			s.observe(hwm)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// overallPeak returns the peak resident memory in bytes over the whole run.
func (s *sampler) overallPeak() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.overall
}

// sample is one line of the Prometheus text exposition format.
type sample struct {
	Labels map[string]string
	Value  float64
}

// parseMetric returns the samples of the metric family name from a
// Prometheus text exposition. Only what controller-runtime's /metrics emits
// is supported: counters and gauges with quoted, escaped label values.
func parseMetric(text, name string) ([]sample, error) {
	var out []sample
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, name)
		if !ok || line == "" || line[0] == '#' || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		s := sample{Labels: map[string]string{}}
		if rest[0] == '{' {
			var err error
			if rest, err = parseLabels(rest[1:], s.Labels); err != nil {
				return nil, fmt.Errorf("metric %s: %w in %q", name, err, line)
			}
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return nil, fmt.Errorf("metric %s: no value in %q", name, line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metric %s: value in %q: %w", name, line, err)
		}
		s.Value = v
		out = append(out, s)
	}
	return out, nil
}

// parseLabels parses `k="v",k2="v2"}` into labels and returns what follows
// the closing brace.
func parseLabels(s string, labels map[string]string) (string, error) {
	for {
		s = strings.TrimLeft(s, " ,")
		if strings.HasPrefix(s, "}") {
			return s[1:], nil
		}
		eq := strings.IndexByte(s, '=')
		if eq < 0 || len(s) < eq+2 || s[eq+1] != '"' {
			return "", errors.New("malformed label")
		}
		key := strings.TrimSpace(s[:eq])
		var val strings.Builder
		i := eq + 2
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(s[i])
				}
				continue
			}
			val.WriteByte(s[i])
		}
		if i >= len(s) {
			return "", errors.New("unterminated label value")
		}
		labels[key] = val.String()
		s = s[i+1:]
	}
}

// sumBy adds up samples grouped by the value of label.
func sumBy(samples []sample, label string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range samples {
		out[s.Labels[label]] += s.Value
	}
	return out
}

func sum(samples []sample) float64 {
	var t float64
	for _, s := range samples {
		t += s.Value
	}
	return t
}

// writeVerbs are the HTTP methods of API writes (server-side apply is PATCH).
var writeVerbs = []string{"POST", "PUT", "PATCH", "DELETE"}

// requestCounts are oria's API requests by HTTP method.
type requestCounts map[string]float64

// sub returns c minus an earlier snapshot.
func (c requestCounts) sub(earlier requestCounts) requestCounts {
	out := requestCounts{}
	for k, v := range c {
		if d := v - earlier[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// writes returns the write requests by verb and their total.
func (c requestCounts) writes() (map[string]int, int) {
	out := map[string]int{}
	total := 0
	for _, v := range writeVerbs {
		n := int(math.Round(c[v]))
		out[v] = n
		total += n
	}
	return out, total
}

// metrics scrapes oria's /metrics endpoint.
type metrics struct {
	url    string
	client *http.Client
}

func (m metrics) scrape(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url, nil)
	if err != nil {
		return "", err
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("scraping %s: %w", m.url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("scraping %s: %s", m.url, resp.Status)
	}
	return string(b), nil
}

// requests returns oria's API requests so far, by method.
func (m metrics) requests(ctx context.Context) (requestCounts, error) {
	text, err := m.scrape(ctx)
	if err != nil {
		return nil, err
	}
	s, err := parseMetric(text, "rest_client_requests_total")
	if err != nil {
		return nil, err
	}
	return sumBy(s, "method"), nil
}

// busy reports whether any of oria's controllers has queued or in-flight
// work.
func (m metrics) busy(ctx context.Context) (bool, error) {
	text, err := m.scrape(ctx)
	if err != nil {
		return false, err
	}
	depth, err := parseMetric(text, "workqueue_depth")
	if err != nil {
		return false, err
	}
	active, err := parseMetric(text, "controller_runtime_active_workers")
	if err != nil {
		return false, err
	}
	return sum(depth)+sum(active) > 0, nil
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of d.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// observer records when objects matching a label selector first appear,
// through a metadata-only informer (the watch events' arrival time).
type observer struct {
	mu      sync.Mutex
	seen    map[string]time.Time // namespace/name -> first seen
	byNS    map[string]time.Time // namespace -> first object seen in it
	last    time.Time
	changed chan struct{} // closed and replaced on every new object
}

// observe starts an observer of gvr objects matching selector and waits for
// its informer to sync; it stops with ctx.
func observe(ctx context.Context, md metadata.Interface, gvr schema.GroupVersionResource, selector string) (*observer, error) {
	o := &observer{seen: map[string]time.Time{}, byNS: map[string]time.Time{}, changed: make(chan struct{})}
	inf := metadatainformer.NewFilteredMetadataInformer(md, gvr, metav1.NamespaceAll, 0, cache.Indexers{},
		func(opts *metav1.ListOptions) { opts.LabelSelector = selector })
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: o.add}); err != nil {
		return nil, err
	}
	go inf.Informer().RunWithContext(ctx)
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.Informer().HasSynced) {
		return nil, fmt.Errorf("watching %s (%s): not synced within 1m", gvr.Resource, selector)
	}
	return o, nil
}

func (o *observer) add(obj any) {
	now := time.Now()
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	key := m.Namespace + "/" + m.Name
	if _, dup := o.seen[key]; dup {
		return
	}
	o.seen[key] = now
	if _, ok := o.byNS[m.Namespace]; !ok {
		o.byNS[m.Namespace] = now
	}
	o.last = now
	close(o.changed)
	o.changed = make(chan struct{})
}

// wait blocks until done (called under the lock) holds, or timeout.
func (o *observer) wait(ctx context.Context, timeout time.Duration, done func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		o.mu.Lock()
		ok, ch := done(), o.changed
		o.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitCount waits until n objects have been seen and returns when the last
// of them arrived.
func (o *observer) waitCount(ctx context.Context, n int, timeout time.Duration) (time.Time, error) {
	err := o.wait(ctx, timeout, func() bool { return len(o.seen) >= n })
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		return time.Time{}, fmt.Errorf("%d of %d objects after %s: %w", len(o.seen), n, timeout, err)
	}
	return o.last, nil
}

// waitNamespace waits for the first object in namespace ns and returns when
// it arrived.
func (o *observer) waitNamespace(ctx context.Context, ns string, timeout time.Duration) (time.Time, error) {
	err := o.wait(ctx, timeout, func() bool { _, ok := o.byNS[ns]; return ok })
	if err != nil {
		return time.Time{}, fmt.Errorf("no object in namespace %s after %s: %w", ns, timeout, err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.byNS[ns], nil
}
