package engine

import (
	"sync"
	"sync/atomic"
)

// MaxInFlight bounds the writes of all reconciles of one set of
// controllers together (of every controller of a manager: they share one
// Engine). With no client-side rate limit it is the most write requests
// oria has in flight at once; the API server's priority and fairness
// queues the rest. More would not make a fan-out faster: the
// 50,000-binding benchmark converged as fast with 2 reconciles of 64 writes
// as with 8 (docs/benchmarks.md).
const MaxInFlight = 128

// Engine is the state the write engine keeps for one set of controllers
// (controller.SetupAll makes one per manager, so that two managers in one
// process never share it): the write tokens all their reconciles share
// (MaxInFlight) and the observer of every outcome. A nil *Engine bounds
// nothing beyond each Writer's workers and observes nothing.
type Engine struct {
	// inFlight holds a token per write in flight.
	inFlight chan struct{}
	// observer is called with the outcomes of every Ensure, Delete and
	// Apply and the kind of their objects (internal/metrics counts writes
	// with it); nil observes nothing. It must be safe for concurrent use.
	observer func(kind string, outcomes []Outcome)
}

// New returns an Engine with MaxInFlight write tokens that reports every
// outcome to observer (nil: to nobody).
func New(observer func(kind string, outcomes []Outcome)) *Engine {
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
				if e != nil {
					e.inFlight <- struct{}{}
				}
				fn(i)
				if e != nil {
					<-e.inFlight
				}
			}
		})
	}
	wg.Wait()
}
