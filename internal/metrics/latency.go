package metrics

import (
	"sync"
	"time"

	"github.com/operator-framework/oria/internal/engine"
)

// maxPending bounds the namespace events waiting for a binding; beyond it
// the oldest are dropped (a namespace event whose binding never comes,
// because it exists already or is in conflict, must not grow memory).
const maxPending = 100000

// pendingTTL drops namespace events older than this without observing them.
const pendingTTL = time.Hour

type pendingKey struct{ instance, namespace string }

// NamespaceLatency measures oria_namespace_binding_latency_seconds: Seen
// records when a namespace event that concerns an instance reached oria,
// Bound observes the time to the instance's first RoleBinding created in
// that namespace. Safe for concurrent use; a nil *NamespaceLatency measures
// nothing.
type NamespaceLatency struct {
	// Now returns the current time (tests set it).
	Now     func() time.Time
	observe func(seconds float64)

	mu      sync.Mutex
	pending map[pendingKey]time.Time
}

// NewBindingLatency returns a NamespaceLatency feeding the
// oria_namespace_binding_latency_seconds histogram (the ScopeInstance
// controller keeps one).
func NewBindingLatency() *NamespaceLatency {
	return NewNamespaceLatency(bindingLatency.Observe)
}

// NewNamespaceLatency returns a NamespaceLatency reporting to observe.
func NewNamespaceLatency(observe func(seconds float64)) *NamespaceLatency {
	return &NamespaceLatency{Now: time.Now, observe: observe, pending: map[pendingKey]time.Time{}}
}

// Seen records that an event of namespace that concerns instance arrived
// now. An earlier event still waiting is kept: the latency runs from the
// first.
func (l *NamespaceLatency) Seen(instance, namespace string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.Now()
	k := pendingKey{instance, namespace}
	if _, ok := l.pending[k]; ok {
		return
	}
	if len(l.pending) >= maxPending {
		l.prune(now)
	}
	l.pending[k] = now
}

// prune drops stale events, and when none is stale, the oldest.
func (l *NamespaceLatency) prune(now time.Time) {
	var oldest pendingKey
	var at time.Time
	for k, t := range l.pending {
		if now.Sub(t) > pendingTTL {
			delete(l.pending, k)
			continue
		}
		if at.IsZero() || t.Before(at) {
			oldest, at = k, t
		}
	}
	if len(l.pending) >= maxPending {
		delete(l.pending, oldest)
	}
}

// Bound takes the outcomes of an instance's RoleBindings, written at at
// (by the clock Now reads): for each namespace with a pending event, a
// Created binding observes the latency, and any other outcome (unchanged,
// conflict, failure) ends the wait without one.
func (l *NamespaceLatency) Bound(instance string, outcomes []engine.Outcome, at time.Time) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	created := map[string]bool{}
	for _, o := range outcomes {
		if o.Action == engine.Created {
			created[o.Namespace] = true
		}
	}
	for _, o := range outcomes {
		k := pendingKey{instance, o.Namespace}
		seen, ok := l.pending[k]
		if !ok {
			continue
		}
		delete(l.pending, k)
		if created[o.Namespace] {
			l.observe(at.Sub(seen).Seconds())
		}
	}
}

// Abandon ends, without a measurement, the waits of an instance that cannot
// bind for a reason of the world's (a missing ServiceAccount or template, a
// spec to fix): the histogram measures oria, not how long the world took.
func (l *NamespaceLatency) Abandon(instance string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.pending {
		if k.instance == instance {
			delete(l.pending, k)
		}
	}
}

// Forget drops the pending events of a namespace (deleted meanwhile).
func (l *NamespaceLatency) Forget(namespace string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.pending {
		if k.namespace == namespace {
			delete(l.pending, k)
		}
	}
}
