package status

import (
	"sync"
	"time"
)

// Spacing holds back routine status writes of an object (what its steady
// state counts changing, nothing else) so that they are at most one per
// Period, the way Kubernetes' endpoint controllers batch their updates.
//
// Why: a ScopeInstance's status lists the namespaces it is bound in. Bound
// in thousands of namespaces, every namespace created or deleted changed
// that list, and each write of it cost the API server a merge patch applied
// to, validated on and stored with the whole list, then sent to every
// watcher, and held up the instance's next reconcile: each new namespace
// waited for the previous one's status write before its binding was made
// (docs/benchmarks.md, History, a2082b4). Spaced, a burst of namespaces
// costs one write per Period, and a binding never waits for a list.
//
// Everything else (a condition's status or reason, the observed
// generation) is written at once; the caller decides what is routine. A
// nil Spacing holds nothing back.
type Spacing struct {
	// Period is the least time between two routine writes of one object.
	Period time.Duration
	// Now returns the time (time.Now when nil; tests set it).
	Now func() time.Time

	mu   sync.Mutex
	last map[string]time.Time
}

// NewSpacing returns a Spacing of period.
func NewSpacing(period time.Duration) *Spacing {
	return &Spacing{Period: period}
}

// Wait returns how long a write of the named object's status must wait: 0
// (write now) unless routine is set and the object's status was written
// less than Period ago.
func (s *Spacing) Wait(name string, routine bool) time.Duration {
	if s == nil || !routine {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.last[name]
	if !ok {
		return 0
	}
	if wait := s.Period - s.now().Sub(at); wait > 0 {
		return wait
	}
	return 0
}

// Wrote records that the named object's status was written now.
func (s *Spacing) Wrote(name string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[string]time.Time{}
	}
	s.last[name] = s.now()
}

// Forget drops what is known of the named object (it is gone).
func (s *Spacing) Forget(name string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.last, name)
}

func (s *Spacing) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}
