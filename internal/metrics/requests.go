package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// Metric names of eligible access (AccessRequests).
const (
	// AccessRequests counts the AccessRequests by state (Requested,
	// Active, Denied, Cancelled, Expired, Ended); Active are the
	// activations in force.
	AccessRequests = "oria_access_requests"
	// OldestPendingRequestSeconds is the age of the oldest request still
	// waiting for approval; absent when none waits.
	OldestPendingRequestSeconds = "oria_access_request_oldest_pending_seconds"
	// ApprovalSeconds is the time from a request's creation to its
	// approval, over the approved requests that exist.
	ApprovalSeconds = "oria_access_request_approval_seconds"
)

// requestStates are the state label's values, in order.
var requestStates = []oriav1alpha1.RequestState{oriav1alpha1.StateRequested, oriav1alpha1.StateActive, oriav1alpha1.StateDenied,
	oriav1alpha1.StateCancelled, oriav1alpha1.StateExpired, oriav1alpha1.StateEnded}

// approvalBuckets are the buckets of ApprovalSeconds: a minute to a day.
var approvalBuckets = []float64{60, 300, 900, 1800, 3600, 4 * 3600, 24 * 3600}

// RequestCollector reports the AccessRequests at scrape time from the
// manager's cache (their status, written by oria alone).
type RequestCollector struct {
	r                        client.Reader
	now                      func() time.Time
	requests, oldest, approv *prometheus.Desc
}

// NewRequestCollector returns a RequestCollector reading from r; now tells
// the time (time.Now when nil).
func NewRequestCollector(r client.Reader, now func() time.Time) *RequestCollector {
	if now == nil {
		now = time.Now
	}
	return &RequestCollector{r: r, now: now,
		requests: prometheus.NewDesc(AccessRequests, "AccessRequests by state: Requested, Active (the activations in force), Denied, Cancelled, Expired, Ended.",
			[]string{"state"}, nil),
		oldest: prometheus.NewDesc(OldestPendingRequestSeconds, "Seconds since the oldest AccessRequest still waiting for approval was created; absent when none waits.",
			nil, nil),
		approv: prometheus.NewDesc(ApprovalSeconds, "Seconds from an AccessRequest's creation to its approval, over the approved requests that exist now.",
			nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *RequestCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.requests
	ch <- c.oldest
	ch <- c.approv
}

// Collect implements prometheus.Collector.
func (c *RequestCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	list := &oriav1alpha1.AccessRequestList{}
	if err := c.r.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.Log.WithName("metrics").Error(err, "collecting oria's access request metrics")
		return
	}
	s := Requests(list.Items, c.now())
	for _, st := range requestStates {
		ch <- prometheus.MustNewConstMetric(c.requests, prometheus.GaugeValue, float64(s.ByState[st]), string(st))
	}
	if s.OldestPending != nil {
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, s.OldestPending.Seconds())
	}
	ch <- prometheus.MustNewConstHistogram(c.approv, uint64(len(s.Approvals)), sum(s.Approvals), buckets(s.Approvals))
}

// RequestState is what the request gauges report.
type RequestState struct {
	ByState       map[oriav1alpha1.RequestState]int
	OldestPending *time.Duration
	// Approvals are the seconds from creation to approval of each
	// approved request.
	Approvals []float64
}

// Requests counts requests at now. It is pure. A request oria has not
// judged yet counts as Requested.
func Requests(requests []oriav1alpha1.AccessRequest, now time.Time) RequestState {
	s := RequestState{ByState: map[oriav1alpha1.RequestState]int{}}
	for i := range requests {
		r := &requests[i]
		st := r.Status.State
		if st == "" {
			st = oriav1alpha1.StateRequested
		}
		s.ByState[st]++
		if st == oriav1alpha1.StateRequested {
			if age := now.Sub(r.CreationTimestamp.Time); s.OldestPending == nil || age > *s.OldestPending {
				s.OldestPending = &age
			}
		}
		if r.Status.ApprovedBy != "" && r.Status.StartsAt != nil {
			s.Approvals = append(s.Approvals, max(0, r.Status.StartsAt.Sub(r.CreationTimestamp.Time).Seconds()))
		}
	}
	return s
}

func sum(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s
}

// buckets are the cumulative counts of v at approvalBuckets.
func buckets(v []float64) map[float64]uint64 {
	out := make(map[float64]uint64, len(approvalBuckets))
	for _, b := range approvalBuckets {
		for _, x := range v {
			if x <= b {
				out[b]++
			}
		}
	}
	return out
}
