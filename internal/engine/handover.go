package engine

import (
	"context"
	"fmt"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// HandOver is one object oria created that another controller has adopted
// since (a role oria generated for an extension, which the extension's
// Helm release adopted when its bundle started shipping one under that
// name), and the JSON patch (RFC 6902) that gives up oria's hold on it.
// The patch is built by its one caller's pure code: it removes oria's
// labels and annotations and narrows oria's server-side apply entry in
// metadata.managedFields to what oria keeps deciding on, without changing
// any other value. Server-side apply alone cannot do that: an apply that
// omits a field removes it when no other manager holds it, and the bundle
// sets the same rules oria did, which leaves them held by oria's entry
// alone.
type HandOver struct {
	Object client.Object
	// Patch is the JSON patch's operations, without the precondition the
	// engine adds (see HandOverAll).
	Patch []map[string]any
}

// HandOverAll patches each object with its HandOver patch, in parallel,
// only if the object is still the one that was read (PatchTested: the
// patch's first operation tests its resourceVersion), so a change made
// meanwhile (by the adopting controller, say) fails the patch (Failed) and
// the next reconcile, which that change triggers, decides again. An object
// gone meanwhile has nothing left to hand over (Unchanged).
func HandOverAll(ctx context.Context, w *Writer, kind string, items []HandOver) []Outcome {
	objs := make([]client.Object, len(items))
	patches := make(map[client.Object][]map[string]any, len(items))
	for i, h := range items {
		objs[i], patches[h.Object] = h.Object, h.Patch
	}
	return PatchTested(ctx, w, kind, objs, func(o client.Object) []map[string]any { return patches[o] })
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
