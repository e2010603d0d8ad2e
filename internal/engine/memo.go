package engine

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultRecheck is how long the Memo trusts what it remembers.
const DefaultRecheck = 30 * time.Second

// Memo remembers the objects the engine found holding a name oria wants
// (conflicts). Such objects are not oria's and so not in oria's cache, and
// no event says when they change; without a memory every reconcile would pay
// a failed create and a read for each. A remembered conflict is reported
// without any request until it is half Writer.Recheck old; the next reconcile
// after that reads the object again (a read, never a failed create) and
// creates oria's object if it is gone. Controllers requeue objects in
// conflict after the same interval, so a conflict that goes away is noticed
// within about that time. What a Memo holds is a fact about the cluster, so
// each controller keeps one for the life of the process. A Memo is safe for
// concurrent use; use NewMemo.
type Memo struct {
	// Now returns the current time (tests set it).
	Now func() time.Time

	mu      sync.Mutex
	entries map[memoKey]memoEntry
	// created are objects the engine created that the cache may not show
	// yet (expectations, as the ReplicaSet controller keeps them): a
	// reconcile that runs before the cache catches up does not create them
	// again (a 409 and a read each, thousands in a large fan-out).
	created map[memoKey]time.Time
	// swept is when created was last cleared of expired expectations.
	swept time.Time
}

// ExpectationTTL bounds how long an object the engine created is assumed
// to exist while the cache does not show it. It must outlast a large
// fan-out: in the benchmark's largest scenario one reconcile runs for tens
// of seconds and the cache lags behind the creates, and a short TTL sent
// creates again (409) and read them back (docs/benchmarks.md, History,
// a15a045). Controllers look again
// after it when a reconcile relied on an expectation, so an object deleted
// before the cache ever saw it is restored within about that time (an object
// the cache saw and someone deleted is restored at once, as always).
const ExpectationTTL = 2 * time.Minute

// memoState is the Memo's answer about one object the engine wants and
// oria's cache does not show (ask).
type memoState int

const (
	// memoUnknown: nothing is remembered; the engine creates the object.
	memoUnknown memoState = iota
	// memoExpected: the engine created it less than ExpectationTTL ago;
	// the cache has not shown it yet.
	memoExpected
	// memoConflict: someone else's object holds the name, remembered
	// recently enough to be trusted (ask returns it).
	memoConflict
	// memoRecheck: someone else's object held the name when last read,
	// long enough ago that it is read again before anything else.
	memoRecheck
)

// memoFact is what the engine tells the Memo about one object (tell).
type memoFact int

const (
	// factNone: nothing was learnt.
	factNone memoFact = iota
	// factCached: the cache shows the object; an expectation of it ends.
	factCached
	// factCreated: the engine created it; it is expected until the cache
	// shows it, for at most ExpectationTTL, and a conflict remembered of
	// its name is forgotten.
	factCreated
	// factConflict: a live object someone else made holds the name; it is
	// remembered.
	factConflict
	// factNoConflict: the name is free, or held by oria's own object; a
	// remembered conflict is forgotten.
	factNoConflict
)

// look is what Ensure asks the Memo about one desired object, once:
// whether oria's cache shows it (inCache: an expectation of it ends, and
// nothing else is asked), else what is remembered of it (ask).
func (m *Memo) look(kind string, key types.NamespacedName, inCache bool, trust time.Duration) (memoState, client.Object) {
	if inCache {
		m.tell(kind, key, factCached, nil)
		return memoUnknown, nil
	}
	return m.ask(kind, key, trust)
}

// ask is the one question the engine asks about an object oria's cache
// does not show: what is remembered of it, a conflict being trusted for
// trust. An expectation older than ExpectationTTL is dropped here.
func (m *Memo) ask(kind string, key types.NamespacedName, trust time.Duration) (memoState, client.Object) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, now := memoKey{kind, key}, m.now()
	if at, ok := m.created[k]; ok {
		if now.Sub(at) < ExpectationTTL {
			return memoExpected, nil
		}
		m.dropExpectation(k)
	}
	e, ok := m.entries[k]
	switch {
	case !ok:
		return memoUnknown, nil
	case now.Sub(e.at) < trust:
		return memoConflict, e.obj
	default:
		return memoRecheck, nil
	}
}

// tell records what the engine learnt about an object: obj is the live
// object of factConflict.
func (m *Memo) tell(kind string, key types.NamespacedName, fact memoFact, obj client.Object) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := memoKey{kind, key}
	switch fact {
	case factCached:
		m.dropExpectation(k)
	case factCreated:
		m.expect(k)
		delete(m.entries, k)
	case factConflict:
		m.entries[k] = memoEntry{obj: obj, at: m.now()}
	case factNoConflict:
		delete(m.entries, k)
	}
}

// expect records an expectation of k, with m.mu held.
func (m *Memo) expect(k memoKey) {
	now := m.now()
	if m.created == nil {
		m.created = map[memoKey]time.Time{}
	}
	// Expectations nobody asks about again (the object was deleted before
	// the cache saw it, its owner went) expire here, once per TTL.
	if now.Sub(m.swept) >= ExpectationTTL {
		for k, at := range m.created {
			if now.Sub(at) >= ExpectationTTL {
				delete(m.created, k)
			}
		}
		m.swept = now
	}
	m.created[k] = now
}

// Gone tells the Memo that the cache saw obj deleted (an event of the watch
// on kind): if the engine created it and still expects it, the expectation
// is void and the next reconcile creates it again. Without it, an object
// created and deleted before any reconcile saw it in the cache stayed
// expected, and absent, until ExpectationTTL.
func (m *Memo) Gone(kind string, obj client.Object) {
	m.tell(kind, Key(obj), factCached, nil)
}

// Seen tells the Memo that the cache shows obj (a create event of the watch
// on kind; the informer updates its store before it calls handlers): the
// expectation of an object the engine created ends there, so expectations
// last as long as the watch lags behind the creates, not until the next
// reconcile of their owner (a lingering expectation per binding at the end
// of a large fan-out: docs/benchmarks.md, History, 750471e). A reconcile working from a snapshot taken
// before the event does not create the object again: the Writer's Cache is
// looked at first (see Writer.Cache).
func (m *Memo) Seen(kind string, obj client.Object) {
	m.tell(kind, Key(obj), factCached, nil)
}

// dropExpectation deletes an expectation; an emptied map is dropped, as Go
// maps never shrink: after a large fan-out it would keep its buckets for
// the life of the process.
func (m *Memo) dropExpectation(k memoKey) {
	delete(m.created, k)
	if len(m.created) == 0 {
		m.created = nil
	}
}

type memoKey struct {
	kind string
	key  types.NamespacedName
}

type memoEntry struct {
	obj client.Object
	at  time.Time
}

// NewMemo returns an empty Memo.
func NewMemo() *Memo {
	return &Memo{Now: time.Now, entries: map[memoKey]memoEntry{}}
}

// count returns of() under the lock.
func (m *Memo) count(of func() int) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return of()
}

func (m *Memo) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Of returns the Memo's side of the watch on kind's objects
// (watch.EnqueueController tells it what the watch saw).
func (m *Memo) Of(kind string) KindMemo { return KindMemo{memo: m, kind: kind} }

// KindMemo is a Memo for the objects of one kind.
type KindMemo struct {
	memo *Memo
	kind string
}

// Seen: see Memo.Seen.
func (k KindMemo) Seen(obj client.Object) { k.memo.Seen(k.kind, obj) }

// Gone: see Memo.Gone.
func (k KindMemo) Gone(obj client.Object) { k.memo.Gone(k.kind, obj) }
