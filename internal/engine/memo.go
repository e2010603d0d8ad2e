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
// concurrent use; use NewMemo. A nil *Memo remembers nothing.
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
// fan-out: in the benchmark's 50,000-binding scenario one reconcile runs for
// tens of seconds and the cache lags behind the creates, and with 10 s about
// 21,000 creates were sent again (409) and read back. Controllers look again
// after it when a reconcile relied on an expectation, so an object deleted
// before the cache ever saw it is restored within about that time (an object
// the cache saw and someone deleted is restored at once, as always).
const ExpectationTTL = 2 * time.Minute

func (m *Memo) expectCreated(kind string, key types.NamespacedName) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
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
	m.created[memoKey{kind, key}] = now
}

// expected reports whether the engine created the object less than
// ExpectationTTL ago.
func (m *Memo) expected(kind string, key types.NamespacedName) bool {
	if m == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.created[memoKey{kind, key}]
	if ok && m.now().Sub(at) >= ExpectationTTL {
		m.dropExpectation(memoKey{kind, key})
		return false
	}
	return ok
}

// Gone tells the Memo that the cache saw obj deleted (an event of the watch
// on kind): if the engine created it and still expects it, the expectation
// is void and the next reconcile creates it again. Without it, an object
// created and deleted before any reconcile saw it in the cache stayed
// expected, and absent, until ExpectationTTL.
func (m *Memo) Gone(kind string, obj client.Object) {
	m.observed(kind, Key(obj))
}

// Seen tells the Memo that the cache shows obj (a create event of the watch
// on kind; the informer updates its store before it calls handlers): the
// expectation of an object the engine created ends there, so expectations
// last as long as the watch lags behind the creates, not until the next
// reconcile of their owner (50,000 of them, 9 MB, at the end of the
// benchmark's large fan-out). A reconcile working from a snapshot taken
// before the event does not create the object again: a Writer with a Cache
// looks there first (see Writer.Cache).
func (m *Memo) Seen(kind string, obj client.Object) {
	m.observed(kind, Key(obj))
}

// observed drops the expectation of an object the cache shows.
func (m *Memo) observed(kind string, key types.NamespacedName) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropExpectation(memoKey{kind, key})
}

// dropExpectation deletes an expectation; an emptied map is dropped, as Go
// maps never shrink: after a 50,000-binding fan-out it would keep its
// buckets (6 MB) for the life of the process.
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

// fresh returns the remembered object when it is younger than recheck.
func (m *Memo) fresh(kind string, key types.NamespacedName, recheck time.Duration) client.Object {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[memoKey{kind, key}]
	if !ok || m.now().Sub(e.at) >= recheck {
		return nil
	}
	return e.obj
}

func (m *Memo) has(kind string, key types.NamespacedName) bool {
	if m == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.entries[memoKey{kind, key}]
	return ok
}

func (m *Memo) remember(kind string, key types.NamespacedName, obj client.Object) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entries[memoKey{kind, key}] = memoEntry{obj: obj, at: m.now()}
}

func (m *Memo) forget(kind string, key types.NamespacedName) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, memoKey{kind, key})
}

// count returns of() under the lock; 0 for a nil Memo.
func (m *Memo) count(of func() int) int {
	if m == nil {
		return 0
	}
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
