// Package engine is the one place where oria writes RBAC objects: the
// extension controller's ClusterRoles, the ScopeTemplate controller's inline
// ClusterRoles and the ScopeInstance controller's RoleBindings and
// ClusterRoleBindings all go through Ensure and Delete.
//
// Desired objects are typed API objects (rbacv1.ClusterRole, ...) built by
// pure functions elsewhere; the engine turns them into writes:
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
//     someone else's is never deleted.
//
// Writes fan out over a bounded worker pool, within the write tokens of the
// Engine shared by one set of controllers; one object's failure never
// stops the others, and every object gets an Outcome.
package engine

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
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
	// the identity oria wrote as (Writer.Attenuated) may not grant it; Err
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

// Writer performs the writes of a reconcile.
type Writer struct {
	// Client writes, and reads from the (oria-labelled) cache.
	Client client.Client
	// Reader reads from the API server directly: an object the cache does
	// not show may still exist without oria's labels.
	Reader client.Reader
	// Cache reads oria's (label-filtered) cache as it is now, not as the
	// reconcile's snapshot showed it: an object this controller created
	// since the snapshot is there once its watch event arrived, which ends
	// its expectation (Memo.Seen). nil: the snapshot and the expectations
	// alone decide.
	Cache client.Reader
	// Workers bounds parallel writes; DefaultWorkers when 0.
	Workers int
	// Memo remembers objects found in conflict; nil remembers nothing (every
	// reconcile then pays a create and a read for each).
	Memo *Memo
	// Recheck is how long a remembered conflict is trusted
	// (DefaultRecheck when 0).
	Recheck time.Duration
	// Revoker deletes (deletions only take access away, so they need no
	// attenuation); Client when nil.
	Revoker client.Client
	// Engine is the state shared with every other Writer of the same set
	// of controllers: write tokens and the observer (nil: none).
	Engine *Engine
	// Attenuated says that Client writes as an identity that caps what may
	// be granted (an impersonated ServiceAccount): a write it may not make
	// is the outcome Forbidden, not a failure.
	Attenuated bool
}

func (w *Writer) revoker() client.Client {
	if w.Revoker != nil {
		return w.Revoker
	}
	return w.Client
}

// refused turns the error of a write that grants into an action.
func (w *Writer) refused(err error, format string, args ...any) (Action, error) {
	wrapped := fmt.Errorf(format+": %w", append(args, err)...)
	if w.Attenuated && apierrors.IsForbidden(err) {
		return Forbidden, wrapped
	}
	return Failed, wrapped
}

func (w *Writer) recheck() time.Duration {
	if w.Recheck > 0 {
		return w.Recheck
	}
	return DefaultRecheck
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
	// become want (an immutable field differs); nil means never.
	Replace func(cur, want T) bool
	// Merge returns cur changed into want for an Update, and false when a
	// server-side apply of want is enough. It is used where apply cannot
	// express the change: a stale controller reference to drop, a label
	// someone else added that must go. nil means apply is always enough.
	Merge func(cur, want T) (T, bool)
}

// Key returns the namespace/name of obj.
func Key(obj client.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// ByKey indexes objects by Key.
func ByKey[T client.Object](objs []T) map[types.NamespacedName]T {
	m := make(map[types.NamespacedName]T, len(objs))
	for _, o := range objs {
		m[Key(o)] = o
	}
	return m
}

func (w *Writer) workers() int {
	if w.Workers > 0 {
		return w.Workers
	}
	return DefaultWorkers
}

// Ensure makes every object of desired exist as intended. owns tells an
// object oria created for this owner from anyone else's; cached holds the
// objects of desired's names as oria's cache shows them (by Key). An object
// equal to its intended state costs nothing. The result has one Outcome per
// desired object, in order.
func Ensure[T client.Object](ctx context.Context, w *Writer, k Kind[T], owns func(client.Object) bool, desired []T, cached map[types.NamespacedName]T) []Outcome {
	out := make([]Outcome, len(desired))
	var todo []int
	for i, want := range desired {
		out[i] = Outcome{Namespace: want.GetNamespace(), Name: want.GetName()}
		key := Key(want)
		if cur, ok := cached[key]; ok {
			w.Memo.observed(k.Name, key)
			if !owns(cur) {
				out[i].Action, out[i].Err, out[i].Existing = Conflict, conflictError(k.Name, cur), cur
			} else if terminating(cur) || !k.UpToDate(cur, want) {
				todo = append(todo, i)
			}
			continue
		}
		if w.Memo.expected(k.Name, key) || shown(ctx, w, k, owns, key) {
			out[i].Expected = true
			continue
		}
		// Trusted for half the recheck interval: a recheck after the full
		// interval always reads again, whatever reconciles came between.
		if live := w.Memo.fresh(k.Name, key, w.recheck()/2); live != nil {
			out[i].Action, out[i].Err, out[i].Existing = Conflict, conflictError(k.Name, live), live
			continue
		}
		todo = append(todo, i)
	}
	w.Engine.Parallel(w.workers(), len(todo), func(j int) {
		i := todo[j]
		want := desired[i]
		if cur, ok := cached[Key(want)]; ok {
			if terminating(cur) {
				out[i] = recreate(ctx, w, k, cur, want, out[i])
				return
			}
			out[i].Action, out[i].Err = repair(ctx, w, k, cur, want)
			return
		}
		out[i] = ensureUncached(ctx, w, k, owns, want, out[i])
	})
	return w.Engine.observe(k.Name, out)
}

// ensureUncached handles an object oria's cache does not show: absent, or
// there without oria's labels. A remembered conflict due for a recheck is
// read first (a read, not a create that would fail); anything else is
// created, and read only when it exists after all.
func ensureUncached[T client.Object](ctx context.Context, w *Writer, k Kind[T], owns func(client.Object) bool, want T, o Outcome) Outcome {
	key := Key(want)
	if w.Memo.has(k.Name, key) {
		live := k.New()
		err := w.Reader.Get(ctx, key, live)
		switch {
		case apierrors.IsNotFound(err):
			w.Memo.forget(k.Name, key)
		case err != nil:
			o.Action, o.Err = Failed, fmt.Errorf("reading %s %s: %w", k.Name, describe(want), err)
			return o
		default:
			return classify(ctx, w, k, owns, live, want, o)
		}
	}
	err := w.Client.Create(ctx, want.DeepCopyObject().(client.Object), client.FieldOwner(oriav1alpha1.FieldOwner))
	switch {
	case err == nil:
		w.Memo.expectCreated(k.Name, key)
		o.Action = Created
		return o
	case namespaceGone(err):
		o.Action = Skipped
		return o
	case !apierrors.IsAlreadyExists(err):
		o.Action, o.Err = w.refused(err, "creating %s %s", k.Name, describe(want))
		return o
	}
	live := k.New()
	if rerr := w.Reader.Get(ctx, key, live); rerr != nil {
		if apierrors.IsNotFound(rerr) {
			// Gone again between the create and the read: the next
			// reconcile creates it; report the create's answer.
			o.Action, o.Err = Failed, fmt.Errorf("creating %s %s: %w", k.Name, describe(want), err)
			return o
		}
		o.Action, o.Err = Failed, fmt.Errorf("reading existing %s %s: %w", k.Name, describe(want), rerr)
		return o
	}
	return classify(ctx, w, k, owns, live, want, o)
}

// shown reports whether oria's cache shows key now as an object owns
// accepts: created since the reconcile's snapshot (by this controller, its
// expectation ended by the watch event), so not created again. The event
// brings the next reconcile, which sees it in its snapshot. (An object the
// cache shows for another owner goes the usual way: create, 409, classify.)
func shown[T client.Object](ctx context.Context, w *Writer, k Kind[T], owns func(client.Object) bool, key types.NamespacedName) bool {
	if w.Cache == nil {
		return false
	}
	cur := k.New()
	return w.Cache.Get(ctx, key, cur) == nil && owns(cur)
}

// classify repairs a live object that is oria's, or reports and remembers
// one that is not.
func classify[T client.Object](ctx context.Context, w *Writer, k Kind[T], owns func(client.Object) bool, live, want T, o Outcome) Outcome {
	if !owns(live) {
		w.Memo.remember(k.Name, Key(want), live)
		o.Action, o.Err, o.Existing = Conflict, conflictError(k.Name, live), live
		return o
	}
	w.Memo.forget(k.Name, Key(want))
	if k.UpToDate(live, want) {
		o.Action = Unchanged
		return o
	}
	o.Action, o.Err = repair(ctx, w, k, live, want)
	return o
}

// repair turns oria's object cur into want (see the package documentation).
func repair[T client.Object](ctx context.Context, w *Writer, k Kind[T], cur, want T) (Action, error) {
	if k.Replace != nil && k.Replace(cur, want) {
		uid := cur.GetUID()
		if err := w.revoker().Delete(ctx, cur, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return Failed, fmt.Errorf("deleting %s %s to replace it: %w", k.Name, describe(cur), err)
		}
		if err := w.Client.Create(ctx, want.DeepCopyObject().(client.Object), client.FieldOwner(oriav1alpha1.FieldOwner)); err != nil {
			if namespaceGone(err) {
				return Skipped, nil
			}
			return w.refused(err, "creating %s %s", k.Name, describe(want))
		}
		return Replaced, nil
	}
	if k.Merge != nil {
		if merged, update := k.Merge(cur, want); update {
			if err := w.Client.Update(ctx, merged, client.FieldOwner(oriav1alpha1.FieldOwner)); err != nil {
				return w.refused(err, "updating %s %s", k.Name, describe(want))
			}
			return Updated, nil
		}
	}
	ac, err := ApplyConfiguration(want)
	if err != nil {
		return Failed, fmt.Errorf("%s %s: %w", k.Name, describe(want), err)
	}
	if err := w.Client.Apply(ctx, ac, client.FieldOwner(oriav1alpha1.FieldOwner), client.ForceOwnership); err != nil {
		return w.refused(err, "applying %s %s", k.Name, describe(want))
	}
	return Updated, nil
}

// Delete deletes objs in parallel, each only if it is still the object
// that was read (UID precondition); an object already gone, or replaced by
// another meanwhile, counts as deleted. Finalizers never hold a deletion
// back (see release).
func Delete[T client.Object](ctx context.Context, w *Writer, kind string, objs []T) []Outcome {
	out := make([]Outcome, len(objs))
	w.Engine.Parallel(w.workers(), len(objs), func(i int) {
		obj := objs[i]
		out[i] = Outcome{Namespace: obj.GetNamespace(), Name: obj.GetName(), Action: Deleted}
		uid := obj.GetUID()
		err := release(ctx, w.revoker(), obj)
		if err == nil {
			err = w.revoker().Delete(ctx, obj, client.Preconditions{UID: &uid})
		}
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			out[i].Action, out[i].Err = Failed, fmt.Errorf("deleting %s %s: %w", kind, describe(obj), err)
		}
	})
	return w.Engine.observe(kind, out)
}

// Apply server-side applies partial objects that are not oria's (the one
// label oria adds to a bundle-provided ClusterRole), in parallel, forcing
// oria's ownership of exactly the fields each names.
func Apply(ctx context.Context, w *Writer, acs []runtime.ApplyConfiguration, describe func(i int) string) []Outcome {
	out := make([]Outcome, len(acs))
	w.Engine.Parallel(w.workers(), len(acs), func(i int) {
		out[i] = Outcome{Name: describe(i), Action: Updated}
		if err := w.Client.Apply(ctx, acs[i], client.FieldOwner(oriav1alpha1.FieldOwner), client.ForceOwnership); err != nil {
			out[i].Action, out[i].Err = Failed, fmt.Errorf("applying %s: %w", describe(i), err)
		}
	})
	return w.Engine.observe(applyKind(acs), out)
}
