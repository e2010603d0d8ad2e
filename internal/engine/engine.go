// Package engine is the one place where oria writes objects to the API
// server (besides the status of the objects it reconciles, written by
// package status, its Events, the SubjectAccessReviews package authz asks,
// and the guard's serving certificate, package servingcert's). What it
// writes, and the one call for each:
//
//   - RBAC objects oria owns: the extension controller's generated
//     ClusterRoles, the ScopeTemplate controller's inline ClusterRoles, the
//     ScopeInstance controller's RoleBindings and ClusterRoleBindings
//     (Ensure, Delete: write.go; Kinds in kinds.go; a grant's bindings as
//     one binding.Set: EnsureSet, DeleteSet, set.go), and ClusterRoles the
//     caller read and rewrites, never creating them (Rewrite, write.go, and
//     PatchTested, a JSON patch tested against the resourceVersion read,
//     handover.go);
//   - the ScopeTemplates and ScopeInstances compiled from RBACPolicies
//     (Ensure, Delete; ScopeTemplateKind, ScopeInstanceKind in
//     oriakinds.go: repaired by an update of the whole spec);
//   - fields in objects oria does not own, under a field manager the
//     caller names, an object created only if none of its name exists, an
//     owner reference removed, an object deleted only if unchanged
//     (ApplyFields, ApplyForced, Withdraw, CreateNew, Disown,
//     DeleteUnchanged: shared.go; package publisher's publication writes);
//   - the one label oria owns on a bundle-provided ClusterRole in Legacy
//     mode (Apply: apply.go), and the hand-over of a generated role that
//     the extension's Helm release adopted (HandOverAll, handover.go);
//   - oria's label on what an earlier oria created without it (AddLabel:
//     shared.go, manager.Relabel at start).
//
// Desired objects are typed API objects (rbacv1.ClusterRole, ...) built by
// pure functions elsewhere; Ensure turns them into writes:
//
//   - an object that is not in oria's cache is created with Create, never
//     applied: apply is an upsert, and an object of that name that oria did
//     not create must fail the write rather than be taken over. There is no
//     read before the create; an AlreadyExists answer is followed by one read
//     of the live object, which is then repaired (it is oria's, without its
//     labels) or reported as a Conflict and remembered (Memo), so that an
//     unchanged world costs no further request until the memory is due for a
//     recheck (a read, never a failed create);
//   - oria's object that drifted is repaired with a forced server-side apply
//     of the full intended object (one field owner, oria's); an update when
//     something apply cannot remove must go (a stale controller reference, a
//     label that would widen access); a delete and create when an immutable
//     field differs (a binding's roleRef);
//   - deletions carry a UID precondition, so an object replaced meanwhile by
//     someone else's is never deleted;
//   - a finalizer on an object oria deletes never keeps a grant alive. The
//     RBAC authorizer honours a binding (and a ClusterRole's rules) until
//     the object is gone, not until its deletion is requested, and anyone
//     who may update an object may add a finalizer to it: a namespace admin
//     to the RoleBindings oria made in their namespace. oria made the object
//     and decides when it goes, so before it deletes one that carries
//     finalizers, and whenever its cache shows one of its objects held in
//     deletion by finalizers, it removes them (release). Nothing oria makes
//     carries a finalizer of oria's own; an object that carries Kubernetes'
//     foregroundDeletion (for the garbage collector, while no oria runs)
//     loses it too when oria deletes it.
//
// Writes fan out over a bounded worker pool, within the write tokens of the
// Engine shared by one set of controllers; one object's failure never
// stops the others, and every RBAC object gets an Outcome, which the
// Engine's observer counts (oria_writes_total).
package engine

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultWorkers bounds how many writes one reconcile has in flight.
const DefaultWorkers = 64

// Action is what the engine did with one object.
type Action int

// Actions, in the order a summary lists them.
const (
	// Unchanged: the object was already as intended.
	Unchanged Action = iota
	// Created: the object did not exist and was created.
	Created
	// Updated: oria's object had drifted and was repaired.
	Updated
	// Replaced: the object had an immutable field (a binding's roleRef)
	// that differed, so it was deleted and created again.
	Replaced
	// Deleted: the object is no longer intended and was deleted.
	Deleted
	// Conflict: an object of that name exists that oria did not create for
	// this owner; it was left alone. Outcome.Existing is that object.
	Conflict
	// Skipped: the object's namespace is being deleted (or is gone), so
	// nothing can be created there; not an error.
	Skipped
	// Forbidden: the API server refused a write that grants access because
	// the identity oria wrote as (Writer.Ceiling) may not grant it; Err
	// is the API server's answer. Not retried with backoff: the caller
	// looks again later.
	Forbidden
	// Failed: the API server refused the write; Err says why.
	Failed
)

// Outcome is the result of one object's write.
type Outcome struct {
	Namespace string
	Name      string
	Action    Action
	// Err is set for Failed (the error) and Conflict (a *ConflictError).
	Err error
	// Existing is, for a Conflict, the object that holds the name (as read
	// from the API server, possibly earlier: see Memo).
	Existing client.Object
	// Expected is set on an Unchanged object that the engine created a
	// moment ago and the cache does not show yet (see ExpectationTTL).
	Expected bool
}

// Writer performs the writes of a reconcile; a controller builds one per
// reconcile from its own dependencies. Client, Revoker and Engine are used
// by every write, Reader, Cache and Memo by Ensure: a Writer passed to a
// call has what the call uses.
type Writer struct {
	// Client writes, and reads from the (oria-labelled) cache; for an
	// instance with a ceiling it writes as the ceiling's ServiceAccount.
	Client client.Client
	// Revoker deletes: oria's own client (deletions only take access
	// away, so they need no ceiling).
	Revoker client.Client
	// Reader reads from the API server directly: an object the cache does
	// not show may still exist without oria's labels.
	Reader client.Reader
	// Cache reads oria's (label-filtered) cache as it is now, not as the
	// reconcile's snapshot showed it: an object this controller created
	// since the snapshot is there once its watch event arrived, which ends
	// its expectation (Memo.Seen).
	Cache client.Reader
	// Memo remembers objects found in conflict and objects created, for
	// the controller's life.
	Memo *Memo
	// Engine is the state shared with every other Writer of the same set
	// of controllers: write tokens and the observer.
	Engine *Engine
	// Workers bounds parallel writes; DefaultWorkers when 0.
	Workers int
	// Recheck is how long a remembered conflict is trusted
	// (DefaultRecheck when 0).
	Recheck time.Duration
	// Ceiling says that Client writes as the ServiceAccount of a ceiling,
	// which caps what may be granted: a write it may not make is the
	// outcome Forbidden, not a failure.
	Ceiling bool
}

// Kind describes one object kind to the engine.
type Kind[T client.Object] struct {
	// Name is the kind, for messages.
	Name string
	// New returns an empty object to read into.
	New func() T
	// UpToDate reports whether cur has everything of want.
	UpToDate func(cur, want T) bool
	// Replace reports whether cur must be deleted and created again to
	// become want (an immutable field differs; Never for a kind without
	// one).
	Replace func(cur, want T) bool
	// Merge returns cur changed into want for an Update, and false when a
	// server-side apply of want is enough. It is used where apply cannot
	// express the change: a stale controller reference to drop, a label
	// someone else added that must go.
	Merge func(cur, want T) (T, bool)
}

// Never is the Replace of a kind whose objects have no immutable field.
func Never[T client.Object](cur, want T) bool { return false }

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

func (e *Engine) observe(kind string, out []Outcome) []Outcome {
	if len(out) > 0 {
		e.observer(kind, out)
	}
	return out
}

// applyKind is the kind an apply configuration names, for the observer.
func applyKind(acs []runtime.ApplyConfiguration) string {
	for _, ac := range acs {
		if k, ok := ac.(interface{ GetKind() *string }); ok && k.GetKind() != nil {
			return *k.GetKind()
		}
	}
	return ""
}
