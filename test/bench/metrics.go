package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

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

// requestCounts are oria's API requests by HTTP method, and under
// conflictKey those the API server refused with 409 Conflict (a create of
// an object that exists, an update of a stale one): wasted writes.
type requestCounts map[string]float64

// conflictKey counts the 409 responses in requestCounts.
const conflictKey = "409"

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

// families scrapes oria's /metrics once and returns the samples of each
// named metric family, in order.
func (m metrics) families(ctx context.Context, names ...string) ([][]sample, error) {
	text, err := m.scrape(ctx)
	if err != nil {
		return nil, err
	}
	out := make([][]sample, len(names))
	for i, name := range names {
		if out[i], err = parseMetric(text, name); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// requests returns oria's API requests so far, by method.
func (m metrics) requests(ctx context.Context) (requestCounts, error) {
	f, err := m.families(ctx, "rest_client_requests_total")
	if err != nil {
		return nil, err
	}
	c := requestCounts(sumBy(f[0], "method"))
	c[conflictKey] = sumBy(f[0], "code")[conflictKey]
	return c, nil
}

// busy reports whether any of oria's controllers has queued or in-flight
// work.
func (m metrics) busy(ctx context.Context) (bool, error) {
	f, err := m.families(ctx, "workqueue_depth", "controller_runtime_active_workers")
	if err != nil {
		return false, err
	}
	return sum(f[0])+sum(f[1]) > 0, nil
}

// waits are, per controller, how many reconciles ran and how long they
// took, and how long the requests waited in the queue before (seconds):
// controller-runtime's reconcile_time and workqueue queue_duration
// histograms.
type waits map[string]*wait

type wait struct{ reconciles, reconcileSeconds, queued, queuedSeconds float64 }

func (m metrics) waits(ctx context.Context) (waits, error) {
	f, err := m.families(ctx,
		"controller_runtime_reconcile_time_seconds_count", "controller_runtime_reconcile_time_seconds_sum",
		"workqueue_queue_duration_seconds_count", "workqueue_queue_duration_seconds_sum")
	if err != nil {
		return nil, err
	}
	out := waits{}
	get := func(name string) *wait {
		if out[name] == nil {
			out[name] = &wait{}
		}
		return out[name]
	}
	for c, v := range sumBy(f[0], "controller") {
		get(c).reconciles = v
	}
	for c, v := range sumBy(f[1], "controller") {
		get(c).reconcileSeconds = v
	}
	for c, v := range sumBy(f[2], "name") {
		get(c).queued = v
	}
	for c, v := range sumBy(f[3], "name") {
		get(c).queuedSeconds = v
	}
	return out, nil
}

// since describes, for the log, the controllers that reconciled since
// earlier: how many reconciles, their mean time and the mean time a
// request waited in the queue.
func (w waits) since(earlier waits) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(w)) {
		now, was := w[name], earlier[name]
		if was == nil {
			was = &wait{}
		}
		n, q := now.reconciles-was.reconciles, now.queued-was.queued
		if n <= 0 {
			continue
		}
		mean := time.Duration((now.reconcileSeconds - was.reconcileSeconds) / n * float64(time.Second))
		var queued time.Duration
		if q > 0 {
			queued = time.Duration((now.queuedSeconds - was.queuedSeconds) / q * float64(time.Second))
		}
		parts = append(parts, fmt.Sprintf("%s %d reconciles, mean %s, queued %s", name, int(n), mean.Round(time.Millisecond), queued.Round(time.Millisecond)))
	}
	return strings.Join(parts, "; ")
}
