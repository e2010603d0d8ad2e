package publish

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/ownership"
)

// Which ConfigMaps oria deletes.
//
// oria deletes only a ConfigMap it created, and knows that it created one
// by the ownerReference to the instance (its UID) that it sets in the very
// request that creates the ConfigMap (Creation): a create fails if the
// ConfigMap exists, so a ConfigMap someone else made never gets it from
// oria. Labels, annotations and field managers decide nothing: anyone who
// may patch a ConfigMap can write them, oria's names included.
//
// While the instance lives, withdrawing from a ConfigMap it created deletes
// the ConfigMap once nothing is left in it (Dispose). Once the instance is
// gone, oria never deletes: the garbage collector removes the ConfigMaps
// whose ownerReference names the deleted instance. A ConfigMap oria created
// in which someone else wrote a key loses the ownerReference (Shared), so
// that it outlives the instance with their keys.
//
// An ownerReference, too, can be written by whoever may patch the
// ConfigMap; but such a user can already have the garbage collector delete
// it (an ownerReference to an owner that does not exist, or that they
// delete), so deleting on it gives nobody more than patch gives.

// OwnerReference is the reference a ConfigMap oria creates for si carries:
// not a controller reference, and without blockOwnerDeletion (deleting the
// instance never waits for it).
func OwnerReference(si *oriav1alpha1.ScopeInstance) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: oriav1alpha1.GroupVersion.String(),
		Kind:       ownership.KindScopeInstance,
		Name:       si.Name,
		UID:        si.UID,
	}
}

// Creation is the ConfigMap oria creates when the one si publishes into
// does not exist: empty but for the ownerReference that records, from its
// creation, that oria made it for si. The key, label and annotation follow
// with the server-side apply of ConfigMap, so that the withdrawal (an apply
// naming no field) removes them; the ownerReference stays.
func Creation(si *oriav1alpha1.ScopeInstance, ref oriav1alpha1.ConfigMapKeyReference) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace:       ref.Namespace,
		Name:            ref.Name,
		OwnerReferences: []metav1.OwnerReference{OwnerReference(si)},
	}}
}

// OwnedBy reports whether refs hold the ownerReference oria sets on a
// ConfigMap it creates for the instance with this UID. An empty uid (an
// instance known only by name) owns nothing.
func OwnedBy(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if uid != "" && r.UID == uid && r.Kind == ownership.KindScopeInstance && groupOf(r.APIVersion) == oriav1alpha1.GroupVersion.Group {
			return true
		}
	}
	return false
}

func groupOf(apiVersion string) string {
	group, _, _ := strings.Cut(apiVersion, "/")
	return group
}

// Shared reports whether a ConfigMap oria created for the instance with
// this UID holds keys of others besides the instance's key: it must then
// no longer be deleted with the instance (oria removes its ownerReference).
func Shared(cm *corev1.ConfigMap, uid types.UID, key string) bool {
	if !OwnedBy(cm.OwnerReferences, uid) {
		return false
	}
	for k := range cm.Data {
		if k != key {
			return true
		}
	}
	for k := range cm.BinaryData {
		if k != key {
			return true
		}
	}
	return false
}

// Disposal is what becomes of a ConfigMap a living instance withdrew from.
type Disposal int

const (
	// Keep: oria did not create it for the instance; only the instance's
	// key, label and annotation were withdrawn.
	Keep Disposal = iota
	// Delete: oria created it for the instance and nothing is left in it.
	Delete
	// Disown: oria created it for the instance, but something of someone
	// else is in it: it stays, without the instance's ownerReference.
	Disown
)

func (d Disposal) String() string {
	return [...]string{"Keep", "Delete", "Disown"}[d]
}

// Dispose decides, from the API server's copy after the withdrawal, what
// becomes of a ConfigMap the living instance with this UID withdrew from.
// Only the ownerReference recorded at creation can make it Delete; its
// emptiness and its field managers (Disposable) must agree, and no other
// owner may hold it.
func Dispose(cm *corev1.ConfigMap, uid types.UID) Disposal {
	if !OwnedBy(cm.OwnerReferences, uid) {
		return Keep
	}
	if len(cm.OwnerReferences) == 1 && Disposable(cm.Data, cm.BinaryData, cm.ManagedFields) {
		return Delete
	}
	return Disown
}
