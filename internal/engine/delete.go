package engine

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A finalizer on an object oria deletes never keeps a grant alive. The
// RBAC authorizer honours a binding (and a ClusterRole's rules) until the
// object is gone, not until its deletion is requested, and anyone who may
// update an object may add a finalizer to it: a namespace admin to the
// RoleBindings oria made in their namespace. oria made the object and
// decides when it goes, so before it deletes one that carries finalizers,
// and whenever its cache shows one of its objects held in deletion by
// finalizers, it removes them (release). Nothing oria makes carries a
// finalizer of oria's own; an object that carries Kubernetes'
// foregroundDeletion (for the garbage collector, while no oria runs) loses
// it too when oria deletes it.

// terminating reports whether obj's deletion was requested.
func terminating(obj client.Object) bool {
	return !obj.GetDeletionTimestamp().IsZero()
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
