package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
)

// Metric names of time-bound grants.
const (
	// TimeBoundGrants counts the ScopeInstances with a window
	// (spec.notBefore or spec.expiresAt) by where now lies in it: pending,
	// active or expired. A time-bound RBACPolicy is counted once, as the
	// ScopeInstance it compiles to.
	TimeBoundGrants = "oria_time_bound_grants"
	// NextExpirySeconds is the time until the soonest expiresAt of an
	// active time-bound grant; absent when none has one.
	NextExpirySeconds = "oria_time_bound_next_expiry_seconds"
)

// Window states, the state label of oria_time_bound_grants.
const (
	WindowStatePending = "pending"
	WindowStateActive  = "active"
	WindowStateExpired = "expired"
)

// WindowCollector reports the time-bound grants at scrape time, from the
// manager's cache and the windows in their specs (no API request, no
// status read: the same judgement as the ScopeInstance controller's).
type WindowCollector struct {
	r      client.Reader
	now    func() time.Time
	grants *prometheus.Desc
	next   *prometheus.Desc
}

// NewWindowCollector returns a WindowCollector reading from r; now tells
// the time (time.Now when nil).
func NewWindowCollector(r client.Reader, now func() time.Time) *WindowCollector {
	if now == nil {
		now = time.Now
	}
	return &WindowCollector{
		r:   r,
		now: now,
		grants: prometheus.NewDesc(TimeBoundGrants,
			"Time-bound grants (ScopeInstances with spec.notBefore or spec.expiresAt; an RBACPolicy counts as the instance it compiles to) by state: pending, active, expired.",
			[]string{"state"}, nil),
		next: prometheus.NewDesc(NextExpirySeconds,
			"Seconds until the soonest spec.expiresAt of an active time-bound grant; absent when no active grant has one.",
			nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *WindowCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.grants
	ch <- c.next
}

// Collect implements prometheus.Collector. When the instances cannot be
// listed the series are left out of the scrape (and the error logged).
func (c *WindowCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	list := &oriav1alpha1.ScopeInstanceList{}
	if err := c.r.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.Log.WithName("metrics").Error(err, "collecting oria's time-bound grant metrics")
		return
	}
	s := Windows(list.Items, c.now())
	for _, state := range []string{WindowStatePending, WindowStateActive, WindowStateExpired} {
		ch <- prometheus.MustNewConstMetric(c.grants, prometheus.GaugeValue, float64(s.Grants[state]), state)
	}
	if s.NextExpiry != nil {
		ch <- prometheus.MustNewConstMetric(c.next, prometheus.GaugeValue, s.NextExpiry.Seconds())
	}
}

// WindowState is what the time-bound grant gauges report.
type WindowState struct {
	// Grants counts the time-bound instances by state.
	Grants map[string]int
	// NextExpiry is the time until the soonest expiresAt of an active one;
	// nil when none has one.
	NextExpiry *time.Duration
}

// Windows judges the windows of instances at now. It is pure.
func Windows(instances []oriav1alpha1.ScopeInstance, now time.Time) WindowState {
	s := WindowState{Grants: map[string]int{WindowStatePending: 0, WindowStateActive: 0, WindowStateExpired: 0}}
	for i := range instances {
		w := binding.InstanceWindow(instances[i].Spec)
		if !w.Bounded() {
			continue
		}
		switch phase, _ := w.At(now); phase {
		case binding.WindowPending:
			s.Grants[WindowStatePending]++
		case binding.WindowExpired:
			s.Grants[WindowStateExpired]++
		default:
			s.Grants[WindowStateActive]++
			if w.ExpiresAt != nil {
				left := w.ExpiresAt.Sub(now)
				if s.NextExpiry == nil || left < *s.NextExpiry {
					s.NextExpiry = &left
				}
			}
		}
	}
	return s
}
