package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// The writes of one kind of object, read top to bottom: Ensure, then
// Rewrite and Delete, which use its leaves, and the fan-out every write of
// the package runs on (Engine.Parallel). Every function Ensure calls in
// this package is below it, in the order it is first called, but for the
// Memo's questions (Memo.look, Memo.tell: memo.go), the Kind's comparisons
// (kinds.go), the reading of the API server's answers (errors.go) and the
// observer (Engine.observe, engine.go). Ensure sorts each desired object by
// what oria's cache and the Memo say of it; what needs a write goes to
// ensureCached (oria's object, drifted or being deleted: recreate or
// repair) or ensureUncached (create, or read a remembered conflict again);
// an object found to exist after all is classified (classify): repaired
// when it is oria's, reported and remembered when it is not.

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
		cur, inCache := cached[key]
		// A remembered conflict is trusted for half the recheck interval:
		// a recheck after the full interval always reads again, whatever
		// reconciles came between.
		state, live := w.Memo.look(k.Name, key, inCache, w.recheck()/2)
		switch {
		case inCache && !owns(cur):
			out[i].Action, out[i].Err, out[i].Existing = Conflict, conflictError(k.Name, cur), cur
		case inCache:
			if terminating(cur) || !k.UpToDate(cur, want) {
				todo = append(todo, i)
			}
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
		var fact memoFact
		if cur, ok := cached[Key(desired[i])]; ok {
			out[i], fact = ensureCached(ctx, w, k, cur, desired[i], out[i])
		} else {
			out[i], fact = ensureUncached(ctx, w, k, owns, desired[i], recheck[i], out[i])
		}
		// What the write learnt is told to the Memo here, once (the last
		// fact learnt: a create also ends a remembered conflict).
		if fact != factNone {
			w.Memo.tell(k.Name, Key(desired[i]), fact, out[i].Existing)
		}
	})
	return w.Engine.observe(k.Name, out)
}

// Key returns the namespace/name of obj.
func Key(obj client.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// terminating reports whether obj's deletion was requested.
func terminating(obj client.Object) bool {
	return !obj.GetDeletionTimestamp().IsZero()
}

func (w *Writer) recheck() time.Duration {
	if w.Recheck > 0 {
		return w.Recheck
	}
	return DefaultRecheck
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

func (w *Writer) workers() int {
	if w.Workers > 0 {
		return w.Workers
	}
	return DefaultWorkers
}

// ensureCached writes oria's object cur, as the cache shows it, into want:
// recreated when its deletion was requested, else repaired.
func ensureCached[T client.Object](ctx context.Context, w *Writer, k Kind[T], cur, want T, o Outcome) (Outcome, memoFact) {
	var fact memoFact
	if terminating(cur) {
		return recreate(ctx, w, k, cur, want, o)
	}
	o.Action, o.Err = repair(ctx, w, k, cur, want)
	return o, fact
}

// recreate handles oria's object cur whose deletion someone requested while
// it is still intended: its finalizers are removed (release), so
// that it goes at once, and want is created again. An object still there
// (the API server has not finished deleting it) is expected to go: its
// delete event brings the next reconcile.
func recreate[T client.Object](ctx context.Context, w *Writer, k Kind[T], cur, want T, o Outcome) (Outcome, memoFact) {
	var fact memoFact
	if err := release(ctx, w.Revoker, cur); err != nil {
		o.Action, o.Err = Failed, err
		return o, fact
	}
	err := w.Client.Create(ctx, want.DeepCopyObject().(client.Object), client.FieldOwner(oriav1alpha1.FieldOwner))
	switch {
	case err == nil:
		o.Action, fact = Created, factCreated
	case apierrors.IsAlreadyExists(err):
		o.Expected = true
	case namespaceGone(err):
		o.Action = Skipped
	default:
		o.Action, o.Err = w.refused(err, "creating %s %s", k.Name, describe(want))
	}
	return o, fact
}

// release removes every finalizer of obj, only if it is still the object
// that was read (a JSON patch that tests its UID first). An object already
// gone is released.
func release(ctx context.Context, c client.Client, obj client.Object) error {
	if len(obj.GetFinalizers()) == 0 {
		return nil
	}
	err := jsonPatch(ctx, c, obj.DeepCopyObject().(client.Object), "/metadata/uid", obj.GetUID(), []map[string]any{{"op": "remove", "path": "/metadata/finalizers"}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing the finalizers %v of %s so that its deletion takes effect: %w", obj.GetFinalizers(), describe(obj), err)
	}
	return nil
}

// jsonPatch patches obj with the JSON patch (RFC 6902) ops, preceded by a
// test that the value at path is still value: a change made since obj was
// read fails the patch (a conflict) instead of being overwritten.
func jsonPatch(ctx context.Context, c client.Client, obj client.Object, path string, value any, ops []map[string]any, opts ...client.PatchOption) error {
	body, err := json.Marshal(append([]map[string]any{{"op": "test", "path": path, "value": value}}, ops...))
	if err != nil {
		return fmt.Errorf("encoding the patch: %w", err)
	}
	return c.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, body), opts...)
}

func describe(obj client.Object) string {
	if obj.GetNamespace() != "" {
		return fmt.Sprintf("%q in namespace %q", obj.GetName(), obj.GetNamespace())
	}
	return fmt.Sprintf("%q", obj.GetName())
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

// ApplyConfiguration returns the server-side apply request for a desired
// typed object: the object as it serializes, less what the server owns
// (creationTimestamp, resourceVersion, uid, managedFields, status) and less
// null fields, which an apply would otherwise claim. The object must carry
// its apiVersion and kind. This is the one conversion between the typed
// objects oria's pure functions build and what it applies.
func ApplyConfiguration(obj client.Object) (runtime.ApplyConfiguration, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		return nil, fmt.Errorf("object %q has no apiVersion/kind to apply", obj.GetName())
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %q for apply: %w", obj.GetName(), err)
	}
	delete(m, "status")
	for k, v := range m {
		if v == nil {
			delete(m, k)
		}
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		for _, k := range []string{"creationTimestamp", "resourceVersion", "uid", "managedFields", "generation"} {
			delete(md, k)
		}
	}
	return client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: m}), nil
}

// ensureUncached handles an object oria's cache does not show: absent, or
// there without oria's labels. A remembered conflict due for a recheck is
// read first (a read, not a create that would fail); anything else is
// created, and read only when it exists after all.
func ensureUncached[T client.Object](ctx context.Context, w *Writer, k Kind[T], owns func(client.Object) bool, want T, recheck bool, o Outcome) (Outcome, memoFact) {
	var fact memoFact
	key := Key(want)
	if recheck {
		live := k.New()
		err := w.Reader.Get(ctx, key, live)
		switch {
		case apierrors.IsNotFound(err):
			fact = factNoConflict
		case err != nil:
			o.Action, o.Err = Failed, fmt.Errorf("reading %s %s: %w", k.Name, describe(want), err)
			return o, fact
		default:
			return classify(ctx, w, k, owns, live, want, o)
		}
	}
	err := w.Client.Create(ctx, want.DeepCopyObject().(client.Object), client.FieldOwner(oriav1alpha1.FieldOwner))
	switch {
	case err == nil:
		o.Action, fact = Created, factCreated
		return o, fact
	case namespaceGone(err):
		o.Action = Skipped
		return o, fact
	case !apierrors.IsAlreadyExists(err):
		o.Action, o.Err = w.refused(err, "creating %s %s", k.Name, describe(want))
		return o, fact
	}
	live := k.New()
	if rerr := w.Reader.Get(ctx, key, live); rerr != nil {
		if apierrors.IsNotFound(rerr) {
			// Gone again between the create and the read: the next
			// reconcile creates it; report the create's answer.
			o.Action, o.Err = Failed, fmt.Errorf("creating %s %s: %w", k.Name, describe(want), err)
			return o, fact
		}
		o.Action, o.Err = Failed, fmt.Errorf("reading existing %s %s: %w", k.Name, describe(want), rerr)
		return o, fact
	}
	return classify(ctx, w, k, owns, live, want, o)
}

// classify repairs a live object that is oria's, or reports and remembers
// one that is not.
func classify[T client.Object](ctx context.Context, w *Writer, k Kind[T], owns func(client.Object) bool, live, want T, o Outcome) (Outcome, memoFact) {
	var fact memoFact
	if !owns(live) {
		o.Action, o.Err, o.Existing, fact = Conflict, conflictError(k.Name, live), live, factConflict
		return o, fact
	}
	fact = factNoConflict
	if k.UpToDate(live, want) {
		o.Action = Unchanged
		return o, fact
	}
	o.Action, o.Err = repair(ctx, w, k, live, want)
	return o, fact
}

// ByKey indexes objects by Key.
func ByKey[T client.Object](objs []T) map[types.NamespacedName]T {
	m := make(map[types.NamespacedName]T, len(objs))
	for _, o := range objs {
		m[Key(o)] = o
	}
	return m
}

// Rewrite turns objects the caller read (cur) into want (want[i] for
// cur[i]) in parallel, one write each (Kind.Merge: an update, or an
// apply), never creating one: an object gone meanwhile counts as
// Unchanged, one owns does not accept is a conflict, left alone. An object
// being deleted is rewritten as it is (its finalizers stay; Ensure would
// release it and create it again). Nothing to rewrite costs nothing.
func Rewrite[T client.Object](ctx context.Context, w *Writer, k Kind[T], owns func(client.Object) bool, cur, want []T) []Outcome {
	if len(cur) == 0 {
		return nil
	}
	out := make([]Outcome, len(cur))
	w.Engine.Parallel(w.workers(), len(cur), func(i int) {
		out[i] = Outcome{Namespace: cur[i].GetNamespace(), Name: cur[i].GetName()}
		if !owns(cur[i]) {
			out[i].Action, out[i].Err, out[i].Existing = Conflict, conflictError(k.Name, cur[i]), cur[i]
			return
		}
		out[i].Action, out[i].Err = repair(ctx, w, k, cur[i], want[i])
		if apierrors.IsNotFound(out[i].Err) {
			out[i].Action, out[i].Err = Unchanged, nil
		}
	})
	return w.Engine.observe(k.Name, out)
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
		err := release(ctx, w.Revoker, obj)
		if err == nil {
			err = w.Revoker.Delete(ctx, obj, client.Preconditions{UID: &uid})
		}
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			out[i].Action, out[i].Err = Failed, fmt.Errorf("deleting %s %s: %w", kind, describe(obj), err)
		}
	})
	return w.Engine.observe(kind, out)
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
