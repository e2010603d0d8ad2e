package publish

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// Timing configures the coalescing of restarts (DefaultQuiet and
// DefaultMaxDelay when zero).
type Timing struct {
	// Quiet is how long the list must stay unchanged before a restart.
	Quiet time.Duration
	// MaxDelay is the longest a changed list waits for its restart.
	MaxDelay time.Duration
}

func (t Timing) quiet() time.Duration {
	if t.Quiet > 0 {
		return t.Quiet
	}
	return DefaultQuiet
}

func (t Timing) maxDelay() time.Duration {
	if t.MaxDelay > 0 {
		return t.MaxDelay
	}
	return DefaultMaxDelay
}

// Observe returns the publication status after the value with hash h (n
// namespaces) was published into cm at now; prev is the status before (nil
// for a first publication) and restart tells whether the publication
// restarts workloads. A new hash is a change (lastChangeTime); the first
// change since the last restart starts the wait (pendingSince).
func Observe(prev *oriav1alpha1.PublicationStatus, cm, h string, n int, restart bool, now metav1.Time) oriav1alpha1.PublicationStatus {
	var st oriav1alpha1.PublicationStatus
	if prev != nil {
		st = *prev.DeepCopy()
	}
	st.ConfigMap, st.Namespaces = cm, int32(n)
	if st.Hash != h {
		st.Hash, st.LastChangeTime = h, &now
		if st.PendingSince == nil {
			st.PendingSince = &now
		}
	}
	if !restart || st.Hash == st.RestartedHash {
		st.PendingSince = nil
	}
	return st
}

// Due tells whether the workloads must be restarted now for st.Hash, and
// otherwise, when a restart is pending, how long to wait before asking
// again. A restart is due once the list has been quiet for Timing.Quiet, or
// has waited Timing.MaxDelay since its first unrestarted change.
func Due(st oriav1alpha1.PublicationStatus, restart bool, now time.Time, t Timing) (bool, time.Duration) {
	if !restart || st.Hash == st.RestartedHash {
		return false, 0
	}
	if st.LastChangeTime == nil || st.PendingSince == nil {
		return true, 0
	}
	quietLeft := t.quiet() - now.Sub(st.LastChangeTime.Time)
	maxLeft := t.maxDelay() - now.Sub(st.PendingSince.Time)
	if quietLeft <= 0 || maxLeft <= 0 {
		return true, 0
	}
	return false, min(quietLeft, maxLeft)
}

// Restarted returns st after the workloads (as "<Kind>/<name>") were
// restarted for st.Hash at now.
func Restarted(st oriav1alpha1.PublicationStatus, workloads []string, now metav1.Time) oriav1alpha1.PublicationStatus {
	st = *st.DeepCopy()
	st.RestartedHash, st.LastRestartTime, st.LastRestartNamespaces = st.Hash, &now, st.Namespaces
	st.PendingSince = nil
	if len(workloads) > maxWorkloads {
		workloads = append(workloads[:maxWorkloads:maxWorkloads], "...")
	}
	st.RestartedWorkloads = workloads
	return st
}

// maxWorkloads is how many restarted workloads the status names (the field
// holds at most 100 items, "..." included).
const maxWorkloads = 99
