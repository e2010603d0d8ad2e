package engine

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// Writes to objects oria does not own, or owns with others: fields
// applied under a field manager the caller names (ApplyFields,
// ApplyForced, Withdraw), an object created only if none of its name
// exists (CreateNew), an owner reference removed (Disown), an object
// deleted only if unchanged (DeleteUnchanged), one label added (AddLabel).
// A caller that names its own field manager, not oriav1alpha1.FieldOwner,
// never removes what another writer of the same object applied. Such
// writes are not RBAC objects and are not reported to the Engine's
// observer (oria_writes_total counts RBAC writes).

// ApplyFields server-side applies ac as owner without force: a field
// another manager holds is a conflict, nothing is written and conflict is
// true (err is then the API server's answer, for the message). An ac that
// names the UID of the object read is never created anew: Gone(err) when
// that object is gone.
func ApplyFields(ctx context.Context, w *Writer, ac runtime.ApplyConfiguration, owner string) (conflict bool, err error) {
	err = w.Client.Apply(ctx, ac, client.FieldOwner(owner))
	return apierrors.IsConflict(err) && apierrors.HasStatusCause(err, metav1.CauseTypeFieldManagerConflict), err
}

// Gone reports whether err is the API server's answer to a write that names
// the UID of the object it read (a server-side apply with metadata.uid),
// when that object no longer exists: deleted (a "uid mismatch" conflict, or
// not found), or replaced by another of the same name (metadata.uid is
// immutable). Nothing was written.
func Gone(err error) bool {
	if err == nil {
		return false
	}
	return apierrors.IsNotFound(err) || apierrors.IsInvalid(err) ||
		(apierrors.IsConflict(err) && !apierrors.HasStatusCause(err, metav1.CauseTypeFieldManagerConflict))
}

// CreateNew creates obj as owner only if no object of its name exists:
// created is false, without an error, when one does. What obj carries (an
// ownerReference) is thereby recorded only on an object this write made,
// never on one someone else made under the same name.
func CreateNew(ctx context.Context, w *Writer, obj client.Object, owner string) (created bool, err error) {
	err = w.Client.Create(ctx, obj, client.FieldOwner(owner))
	if apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	return err == nil, err
}

// Disown removes the ownerReference with UID owner from obj, if obj is
// still the object that was read (its UID; a strategic merge patch that
// deletes the reference by its merge key, whatever else changed). One
// already gone is left alone without an error.
func Disown(ctx context.Context, w *Writer, obj client.Object, owner types.UID, fieldOwner string) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":             obj.GetUID(),
		"ownerReferences": []map[string]any{{"$patch": "delete", "uid": owner}},
	}})
	if err != nil {
		return fmt.Errorf("encoding the patch: %w", err)
	}
	err = w.Client.Patch(ctx, obj, client.RawPatch(types.StrategicMergePatchType, body), client.FieldOwner(fieldOwner))
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// ApplyForced server-side applies ac as owner, taking over the fields it
// names from any other manager.
func ApplyForced(ctx context.Context, w *Writer, ac runtime.ApplyConfiguration, owner string) error {
	return w.Client.Apply(ctx, ac, client.FieldOwner(owner), client.ForceOwnership)
}

// Withdraw server-side applies ac, which names no field but the UID of the
// object read, as owner: owner gives up every field it held in the object.
// gone is true when that object no longer exists (Gone): nothing is
// written, and an apply never creates an empty object in its place.
func Withdraw(ctx context.Context, w *Writer, ac runtime.ApplyConfiguration, owner string) (gone bool, err error) {
	err = w.Client.Apply(ctx, ac, client.FieldOwner(owner))
	if Gone(err) {
		return true, nil
	}
	return false, err
}

// DeleteUnchanged deletes obj only if it is still the object that was read
// (UID and resourceVersion preconditions); one changed since, or already
// gone, is left alone without an error.
func DeleteUnchanged(ctx context.Context, w *Writer, obj client.Object) error {
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	err := w.Client.Delete(ctx, obj, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// AddLabel sets the label key=value on obj with a merge patch, if obj is
// still the object that was read (its UID): no other field changes, and
// server-side apply ownership of obj's other fields stays as it is. One
// gone meanwhile is left alone without an error.
func AddLabel(ctx context.Context, w *Writer, obj client.Object, key, value string) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":    obj.GetUID(),
		"labels": map[string]string{key: value},
	}})
	if err != nil {
		return fmt.Errorf("encoding the patch: %w", err)
	}
	err = w.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body), client.FieldOwner(oriav1alpha1.FieldOwner))
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
