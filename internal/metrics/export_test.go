package metrics

// Pending returns the number of events waiting for a binding (for tests).
func (l *NamespaceLatency) Pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pending)
}
