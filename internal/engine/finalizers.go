package engine

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// A finalizer on an object oria deletes never keeps a grant alive. The
// RBAC authorizer honours a binding (and a ClusterRole's rules) until the
// object is gone, not until its deletion is requested, and anyone who may
// update an object may add a finalizer to it: a namespace admin to the
// RoleBindings oria made in their namespace. oria made the object and
// decides when it goes, so before it deletes one that carries finalizers,
// and whenever its cache shows one of its objects held in deletion by
// finalizers, it removes them (release). Nothing oria makes carries a
// finalizer of oria's own.

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
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": obj.GetUID()},
		{"op": "remove", "path": "/metadata/finalizers"},
	})
	if err != nil {
		return err
	}
	err = c.Patch(ctx, obj.DeepCopyObject().(client.Object), client.RawPatch(types.JSONPatchType, patch))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing the finalizers %v of %s so that its deletion takes effect: %w", obj.GetFinalizers(), describe(obj), err)
	}
	return nil
}

// recreate handles oria's object cur whose deletion someone requested while
// it is still intended: its finalizers are removed, so that it goes at once,
// and want is created again. An object still there (the API server has not
// finished deleting it) is expected to go: its delete event brings the next
// reconcile.
func recreate[T client.Object](ctx context.Context, w *Writer, k Kind[T], cur, want T, o Outcome) Outcome {
	if err := release(ctx, w.revoker(), cur); err != nil {
		o.Action, o.Err = Failed, err
		return o
	}
	err := w.Client.Create(ctx, want.DeepCopyObject().(client.Object), client.FieldOwner(oriav1alpha1.FieldOwner))
	switch {
	case err == nil:
		w.Memo.expectCreated(k.Name, Key(want))
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
