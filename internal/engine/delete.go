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
// finalizers, it removes them (release, ensure.go). Nothing oria makes carries a
// finalizer of oria's own; an object that carries Kubernetes'
// foregroundDeletion (for the garbage collector, while no oria runs) loses
// it too when oria deletes it.

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
