package orphans

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// DeletedTotal is the metric that counts the sweep's deletions.
const DeletedTotal = "oria_orphans_deleted_total"

// deleted counts the objects the sweep deleted, by kind and reason. Like
// internal/metrics' collectors it is process-level: a process has one
// registry (controller-runtime's, served on /metrics).
var deleted = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: DeletedTotal,
	Help: "Objects oria created whose owner was gone (or replaced under the same name), deleted by the sweep, by kind and reason (OwnerGone, OwnerReplaced, NoLabelledOwner).",
}, []string{"kind", "reason"})

var registerOnce sync.Once

// registerMetrics adds the counter to controller-runtime's registry once
// per process.
func registerMetrics() error {
	var err error
	registerOnce.Do(func() {
		err = crmetrics.Registry.Register(deleted)
		if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
			err = nil
		}
	})
	return err
}
