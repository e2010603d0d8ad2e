package engine

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// Two writes that change objects the caller read and never create one:
// Rewrite (the Kind's repair, as Ensure's) and PatchTested (a JSON patch
// tested against the resourceVersion read, for a writer that must not
// fight the one that leads).

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

// PatchTested applies to each of objs, as the caller's cache shows it, the
// JSON patch operations ops returns, after a first operation that tests the
// resourceVersion the cache showed. Unlike Rewrite it never writes over a
// change it did not see: an object changed meanwhile is left alone
// (Failed; the caller looks again at what its cache then shows), one
// deleted meanwhile counts as Unchanged. It writes under oria's field
// manager.
func PatchTested[T client.Object](ctx context.Context, w *Writer, kind string, objs []T, ops func(T) []map[string]any) []Outcome {
	out := make([]Outcome, len(objs))
	w.Engine.Parallel(w.workers(), len(objs), func(i int) {
		obj := objs[i].DeepCopyObject().(client.Object)
		out[i] = Outcome{Namespace: obj.GetNamespace(), Name: obj.GetName(), Action: Updated}
		err := jsonPatch(ctx, w.Client, obj, "/metadata/resourceVersion", objs[i].GetResourceVersion(), ops(objs[i]), client.FieldOwner(oriav1alpha1.FieldOwner))
		switch {
		case apierrors.IsNotFound(err):
			out[i].Action = Unchanged
		case err != nil:
			out[i].Action, out[i].Err = Failed, fmt.Errorf("patching %s %s: %w", kind, describe(obj), err)
		}
	})
	return w.Engine.observe(kind, out)
}
