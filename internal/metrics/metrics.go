// Package metrics holds oria's own Prometheus metrics, served with
// controller-runtime's on the manager's /metrics endpoint
// (sigs.k8s.io/controller-runtime/pkg/metrics.Registry):
//
//   - oria_managed_objects{kind}: the objects oria reconciles (RBACPolicy,
//     ScopeTemplate, ScopeInstance) and the RBAC objects it created
//     (ClusterRole, ClusterRoleBinding, RoleBinding), counted at scrape time
//     from the manager's cache (no API request);
//   - oria_objects_by_ready_reason{kind,status,reason}: the same oria kinds
//     by their Ready condition, and ClusterExtensions by oria's RBACManaged
//     condition; an object without the condition yet is
//     status="Unknown", reason="NotReported";
//   - oria_conflicts{kind}: the objects of each oria kind whose condition
//     reason is Conflict (always reported, 0 included, so that an alert
//     needs no absent());
//   - oria_writes_total{kind,action}: RBAC objects written by the write engine
//     (action created, updated, replaced, deleted);
//   - oria_write_errors_total{kind,reason}: writes the API server refused,
//     by its reason (Forbidden, Invalid, ...); not those a ceiling's
//     ServiceAccount may not make, a standing state that
//     oria_objects_by_ready_reason{reason="Forbidden"} counts;
//   - oria_namespace_binding_latency_seconds: from the moment a namespace
//     event (creation, or a relabelling that makes a selector match) reaches
//     oria to the RoleBinding oria created there for a ScopeInstance;
//   - oria_olm_api_available: 1 once the API server serves OLM v1's
//     ClusterExtension API and the controllers that need it run, 0 while
//     they wait for it (olm.APIWait);
//   - oria_time_bound_grants{state} and oria_time_bound_next_expiry_seconds:
//     the time-bound grants (windows.go), from the cache at scrape time.
//
// docs/user-guide.md (section 13, "Metrics and alerts") lists them with
// example alerts.
package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/operator-framework/oria/internal/engine"
)

// Metric names.
const (
	ManagedObjects          = "oria_managed_objects"
	ObjectsByReadyReason    = "oria_objects_by_ready_reason"
	Conflicts               = "oria_conflicts"
	WritesTotal             = "oria_writes_total"
	WriteErrorsTotal        = "oria_write_errors_total"
	OrphansDeletedTotal     = "oria_orphans_deleted_total"
	NamespaceBindingLatency = "oria_namespace_binding_latency_seconds"
	OLMAPIAvailable         = "oria_olm_api_available"
)

// The collectors are process-level: a process has one Prometheus registry
// (controller-runtime's, served on /metrics), and a collector can be
// registered in it once; so every set of controllers in a process counts
// into the same ones. What each set of controllers keeps to feed them (the
// engine's observer, NamespaceLatency's pending events) lives on its
// reconcilers.
var (
	writes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: WritesTotal,
		Help: "RBAC objects oria wrote, by kind and action (created, updated, replaced, deleted).",
	}, []string{"kind", "action"})
	writeErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: WriteErrorsTotal,
		Help: "RBAC object writes the API server refused, by kind and the API server's reason (Forbidden, Invalid, ...; Unknown for an error without one).",
	}, []string{"kind", "reason"})
	orphansDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: OrphansDeletedTotal,
		Help: "Objects oria created whose owner was gone (or replaced under the same name), deleted by the sweep, by kind and reason (OwnerGone, OwnerReplaced, NoLabelledOwner).",
	}, []string{"kind", "reason"})
	bindingLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    NamespaceBindingLatency,
		Help:    "Seconds from a namespace event (creation, or relabelling into a selector) reaching oria to the RoleBinding oria created there for a ScopeInstance.",
		Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300},
	})
	olmAPIAvailable = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: OLMAPIAvailable,
		Help: "1 when the API server serves OLM v1's ClusterExtension API and oria's controllers that need it run; 0 while they wait for it (OLM v1 not installed).",
	})
)

// actions names the engine actions that are writes.
var actions = map[engine.Action]string{
	engine.Created:  "created",
	engine.Updated:  "updated",
	engine.Replaced: "replaced",
	engine.Deleted:  "deleted",
}

// ObserveWrites counts the writes and failed writes among outcomes (of
// objects of kind); it is the observer of the engine (engine.New) of the
// controllers controller.SetupAll registers.
func ObserveWrites(kind string, outcomes []engine.Outcome) {
	for _, o := range outcomes {
		if a, ok := actions[o.Action]; ok {
			writes.WithLabelValues(kind, a).Inc()
		} else if o.Action == engine.Failed && !apierrors.IsConflict(o.Err) {
			// A Forbidden outcome (a ceiling's ServiceAccount may not
			// grant it) is a standing state, counted by the objects' Ready
			// reason, not an event to count at every recheck. An update
			// that lost an optimistic-concurrency race (409: the object
			// changed since it was read) is not a refusal: the reconcile
			// reads again and retries at once.
			writeErrors.WithLabelValues(kind, errorReason(o.Err)).Inc()
		}
	}
}

// OrphanDeleted counts one deletion by the sweep (package
// controller/orphans) of an object of kind whose owner is gone, for reason.
func OrphanDeleted(kind, reason string) {
	orphansDeleted.WithLabelValues(kind, reason).Inc()
}

// SetOLMAPIAvailable sets oria_olm_api_available; it is the observer of
// olm.APIWait (controller.SetupAll).
func SetOLMAPIAvailable(available bool) {
	v := 0.0
	if available {
		v = 1
	}
	olmAPIAvailable.Set(v)
}

// errorReason is the API server's reason for a refused write (Forbidden,
// Invalid, Conflict, ...), or Unknown.
func errorReason(err error) string {
	if r := apierrors.ReasonForError(err); r != metav1.StatusReasonUnknown {
		return string(r)
	}
	return "Unknown"
}

// registerOnce is process-level for the same reason as the collectors: a
// process has one registry, and a second registration would fail.
var registerOnce sync.Once

// Register adds oria's metrics to controller-runtime's registry (served on
// the manager's /metrics), with the object gauges read from r (the
// manager's cache). Only the first call registers: a process has one
// registry.
func Register(r client.Reader) error {
	var err error
	registerOnce.Do(func() {
		for _, c := range []prometheus.Collector{writes, writeErrors, orphansDeleted, bindingLatency, olmAPIAvailable, NewCollector(r), NewWindowCollector(r, nil), NewRequestCollector(r, nil)} {
			if err = crmetrics.Registry.Register(c); err != nil {
				return
			}
		}
	})
	return err
}
