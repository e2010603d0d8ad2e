package engine

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// The Ensure path, read top to bottom: Ensure sorts each desired object by
// what oria's cache and the Memo say of it; what needs a write goes to
// ensureCached (oria's object, drifted or being deleted: repair or
// recreate) or ensureUncached (create, or read a remembered conflict
// again); an object found to exist after all is classified (classify):
// repaired when it is oria's, reported and remembered when it is not.

// Ensure makes every object of desired exist as intended. owns tells an
// object oria created for this owner from anyone else's; cached holds the
// objects of desired's names as oria's cache shows them (by Key). An object
// equal to its intended state costs nothing. The result has one Outcome per
// desired object, in order.
func Ensure[T client.Object](ctx context.Context, w *Writer, k Kind[T], owns func(client.Object) bool, desired []T, cached map[types.NamespacedName]T) []Outcome {
	out := make([]Outcome, len(desired))
	var todo []int
	// recheck marks the objects whose remembered conflict is due for a
	// read.
	recheck := map[int]bool{}
	for i, want := range desired {
		out[i] = Outcome{Namespace: want.GetNamespace(), Name: want.GetName()}
		key := Key(want)
		if cur, ok := cached[key]; ok {
			w.Memo.tell(k.Name, key, factCached, nil)
			if !owns(cur) {
				out[i].Action, out[i].Err, out[i].Existing = Conflict, conflictError(k.Name, cur), cur
			} else if terminating(cur) || !k.UpToDate(cur, want) {
				todo = append(todo, i)
			}
			continue
		}
		// A remembered conflict is trusted for half the recheck interval:
		// a recheck after the full interval always reads again, whatever
		// reconciles came between.
		state, live := w.Memo.ask(k.Name, key, w.recheck()/2)
		switch {
		case state == memoExpected || shown(ctx, w, k, owns, key):
			out[i].Expected = true
		case state == memoConflict:
			out[i].Action, out[i].Err, out[i].Existing = Conflict, conflictError(k.Name, live), live
		default:
			recheck[i] = state == memoRecheck
			todo = append(todo, i)
		}
	}
	w.Engine.Parallel(w.workers(), len(todo), func(j int) {
		i := todo[j]
		if cur, ok := cached[Key(desired[i])]; ok {
			out[i] = ensureCached(ctx, w, k, cur, desired[i], out[i])
			return
		}
		out[i] = ensureUncached(ctx, w, k, owns, desired[i], recheck[i], out[i])
	})
	return w.Engine.observe(k.Name, out)
}

// shown reports whether oria's cache shows key now as an object owns
// accepts: created since the reconcile's snapshot (by this controller, its
// expectation ended by the watch event), so not created again. The event
// brings the next reconcile, which sees it in its snapshot. (An object the
// cache shows for another owner goes the usual way: create, 409, classify.)
func shown[T client.Object](ctx context.Context, w *Writer, k Kind[T], owns func(client.Object) bool, key types.NamespacedName) bool {
	cur := k.New()
	return w.Cache.Get(ctx, key, cur) == nil && owns(cur)
}

// ensureCached writes oria's object cur, as the cache shows it, into want:
// recreated when its deletion was requested, else repaired.
func ensureCached[T client.Object](ctx context.Context, w *Writer, k Kind[T], cur, want T, o Outcome) Outcome {
	if terminating(cur) {
		return recreate(ctx, w, k, cur, want, o)
	}
	o.Action, o.Err = repair(ctx, w, k, cur, want)
	return o
}

// ensureUncached handles an object oria's cache does not show: absent, or
// there without oria's labels. A remembered conflict due for a recheck is
// read first (a read, not a create that would fail); anything else is
// created, and read only when it exists after all.
func ensureUncached[T client.Object](ctx context.Context, w *Writer, k Kind[T], owns func(client.Object) bool, want T, recheck bool, o Outcome) Outcome {
	key := Key(want)
	if recheck {
		live := k.New()
		err := w.Reader.Get(ctx, key, live)
		switch {
		case apierrors.IsNotFound(err):
			w.Memo.tell(k.Name, key, factNoConflict, nil)
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
		w.Memo.tell(k.Name, key, factCreated, nil)
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

// classify repairs a live object that is oria's, or reports and remembers
// one that is not.
func classify[T client.Object](ctx context.Context, w *Writer, k Kind[T], owns func(client.Object) bool, live, want T, o Outcome) Outcome {
	if !owns(live) {
		w.Memo.tell(k.Name, Key(want), factConflict, live)
		o.Action, o.Err, o.Existing = Conflict, conflictError(k.Name, live), live
		return o
	}
	w.Memo.tell(k.Name, Key(want), factNoConflict, nil)
	if k.UpToDate(live, want) {
		o.Action = Unchanged
		return o
	}
	o.Action, o.Err = repair(ctx, w, k, live, want)
	return o
}

// repair turns oria's object cur into want (see the package documentation):
// replaced when an immutable field differs, updated when apply cannot
// express the change (Kind.Merge), else applied.
func repair[T client.Object](ctx context.Context, w *Writer, k Kind[T], cur, want T) (Action, error) {
	if k.Replace(cur, want) {
		uid := cur.GetUID()
		if err := w.Revoker.Delete(ctx, cur, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
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
	if merged, update := k.Merge(cur, want); update {
		if err := w.Client.Update(ctx, merged, client.FieldOwner(oriav1alpha1.FieldOwner)); err != nil {
			return w.refused(err, "updating %s %s", k.Name, describe(want))
		}
		return Updated, nil
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

// recreate handles oria's object cur whose deletion someone requested while
// it is still intended: its finalizers are removed (release, delete.go), so
// that it goes at once, and want is created again. An object still there
// (the API server has not finished deleting it) is expected to go: its
// delete event brings the next reconcile.
func recreate[T client.Object](ctx context.Context, w *Writer, k Kind[T], cur, want T, o Outcome) Outcome {
	if err := release(ctx, w.Revoker, cur); err != nil {
		o.Action, o.Err = Failed, err
		return o
	}
	err := w.Client.Create(ctx, want.DeepCopyObject().(client.Object), client.FieldOwner(oriav1alpha1.FieldOwner))
	switch {
	case err == nil:
		w.Memo.tell(k.Name, Key(want), factCreated, nil)
		o.Action = Created
	case apierrors.IsAlreadyExists(err):
		o.Expected = true
	case namespaceGone(err):
		o.Action = Skipped
	default:
		o.Action, o.Err = w.refused(err, "creating %s %s", k.Name, describe(want))
	}
	return o
}
