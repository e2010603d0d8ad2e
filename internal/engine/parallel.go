package engine

import (
	"sync"
	"sync/atomic"
)

// MaxInFlight bounds the writes of all reconciles of one set of
// controllers together (of every controller of a manager: they share one
// Engine). With no client-side rate limit it is the most write requests
// oria has in flight at once; the API server's priority and fairness
// queues the rest. More would not make a fan-out faster: the largest
// benchmark converged as fast with 2 reconciles of 64 writes as with 8
// (docs/benchmarks.md, History, 8cb0c1e).
const MaxInFlight = 128

// Engine is the state the write engine keeps for one set of controllers
// (controller.SetupAll makes one per manager, so that two managers in one
// process never share it): the write tokens all their reconciles share
// (MaxInFlight) and the observer of every outcome.
type Engine struct {
	// inFlight holds a token per write in flight.
	inFlight chan struct{}
	// observer is called with the outcomes of every Ensure, Delete, Apply
	// and HandOverAll and the kind of their objects.
	observer Observer
}

// Observer sees the outcomes of every write of an Engine, with the kind of
// their objects: metrics.ObserveWrites counts them (oria_writes_total). It
// must be safe for concurrent use.
type Observer func(kind string, outcomes []Outcome)

// Unobserved is the Observer of an Engine whose writes nobody counts (a
// test's).
func Unobserved(string, []Outcome) {}

// New returns an Engine with MaxInFlight write tokens that reports every
// outcome to observer.
func New(observer Observer) *Engine {
	return &Engine{inFlight: make(chan struct{}, MaxInFlight), observer: observer}
}

// Parallel calls fn(i) for i in [0,n) on at most workers goroutines, each
// call holding one of e's MaxInFlight write tokens.
func (e *Engine) Parallel(workers, n int, fn func(i int)) {
	workers = min(workers, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				e.inFlight <- struct{}{}
				fn(i)
				<-e.inFlight
			}
		})
	}
	wg.Wait()
}
