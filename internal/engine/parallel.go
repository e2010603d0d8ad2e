package engine

import (
	"sync"
	"sync/atomic"
)

// MaxInFlight bounds the writes of all reconciles of the process together
// (of every controller). With no client-side rate limit it is the most
// write requests oria has in flight at once; the API server's priority and
// fairness queues the rest. More would not make a fan-out faster: the
// 50,000-binding benchmark converged as fast with 2 reconciles of 64 writes
// as with 8 (docs/benchmarks.md).
const MaxInFlight = 128

// inFlight holds a token per write in flight (MaxInFlight).
var inFlight = make(chan struct{}, MaxInFlight)

// Parallel calls fn(i) for i in [0,n) on at most workers goroutines, each
// call holding one of the process's MaxInFlight write tokens.
func Parallel(workers, n int, fn func(i int)) {
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
				inFlight <- struct{}{}
				fn(i)
				<-inFlight
			}
		})
	}
	wg.Wait()
}
