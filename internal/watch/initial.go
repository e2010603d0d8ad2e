package watch

import (
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// SkipInitialList passes every event but the creates of an informer's
// initial list (IsInInitialList): oria starting, or, at a takeover, the
// watch's handler registered on an informer that has synced already and
// replaying its cache — thousands of events at size, each mapped through
// a cache lookup.
//
// Use it only on a watch of a controller's own sources whose requests name
// objects of the controller's kind that exist in the cache, the kind being
// watched (For) with a predicate that passes creates: each of those objects
// is enqueued by its own add, and a controller's workers start only once
// all of its watches' caches have synced, so its reconcile reads what the
// skipped event showed. Not on a watch started after the controller (one an
// the API wait defers), nor on one that maps to objects that may be gone (an
// owner reference, an annotation's record): there the event is the only
// news.
func SkipInitialList[T any]() predicate.TypedPredicate[T] {
	return predicate.TypedFuncs[T]{CreateFunc: func(e event.TypedCreateEvent[T]) bool { return !e.IsInInitialList }}
}
