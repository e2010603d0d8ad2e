package orphans

import (
	"fmt"
	"strconv"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/ownership"
)

// The kinds of objects the sweep judges (engine kind names).
var (
	KindRoleBinding        = engine.RoleBindingKind.Name
	KindClusterRoleBinding = engine.ClusterRoleBindingKind.Name
	KindClusterRole        = "ClusterRole"
	KindScopeTemplate      = ownership.KindScopeTemplate
	KindScopeInstance      = ownership.KindScopeInstance
)

// Why an object is an orphan (the reason logged and counted).
const (
	// ReasonOwnerGone: the controller reference names an owner that does
	// not exist.
	ReasonOwnerGone = "OwnerGone"
	// ReasonOwnerReplaced: an owner of that name exists, with another UID
	// than the controller reference records (deleted and created again).
	ReasonOwnerReplaced = "OwnerReplaced"
	// ReasonNoLabelledOwner: the object has no controller reference (the
	// garbage collector removed it when its owner was deleted with
	// orphaning) and no existing owner has the name its owner label
	// records.
	ReasonNoLabelledOwner = "NoLabelledOwner"
)

// Claim is the owner an oria object names: by its controller reference
// (Name and UID), or, when it has none, by its owner label (Label, the
// names.LabelValue of the owner's name).
type Claim struct {
	// Kind is the owner's kind: ScopeInstance, ScopeTemplate, RBACPolicy or
	// ClusterExtension.
	Kind string
	// Name and UID are the controller reference's; Name is "" for a claim
	// by label.
	Name string
	UID  types.UID
	// Label is the owner label's value, for a claim by label.
	Label string
}

// String describes the owner for a log line.
func (c Claim) String() string {
	if c.Name != "" {
		return fmt.Sprintf("%s %q (uid %s)", c.Kind, c.Name, c.UID)
	}
	return fmt.Sprintf("%s labelled %s", c.Kind, strconv.Quote(c.Label))
}

// ownerLabel is, per judged kind, the owner kind and the label that names
// the owner when the object has no controller reference.
var ownerLabel = map[string]struct{ kind, label string }{
	KindRoleBinding:        {ownership.KindScopeInstance, oriav1alpha1.LabelScopeInstance},
	KindClusterRoleBinding: {ownership.KindScopeInstance, oriav1alpha1.LabelScopeInstance},
	KindScopeTemplate:      {ownership.KindRBACPolicy, oriav1alpha1.LabelRBACPolicy},
	KindScopeInstance:      {ownership.KindRBACPolicy, oriav1alpha1.LabelRBACPolicy},
}

// ClaimOf returns the owner obj (an object of the judged kind) claims, and
// false when the sweep does not judge it:
//   - it does not carry oria's managed-by label (not oria's, or one of
//     oria's kinds that nothing compiled);
//   - its controller is something other than its kind's oria owner (not
//     oria's to delete, whatever its labels say);
//   - it is a ClusterRole controlled by its ClusterExtension: the extension
//     controller removes those once the extension is gone (their
//     controller reference brings it to a reconcile of the missing
//     extension, at start and when seen), and treats an extension deleted
//     and created again as the same extension;
//   - it has no controller reference and no owner label, or, for an
//     extension's role, not the annotation that marks a role oria
//     generated (ownership.ExtensionOwns).
func ClaimOf(kind string, obj metav1.Object) (Claim, bool) {
	labels := obj.GetLabels()
	if labels[oriav1alpha1.LabelManaged] != oriav1alpha1.ManagedValue {
		return Claim{}, false
	}
	ref := metav1.GetControllerOf(obj)
	if kind == KindClusterRole {
		return roleClaim(obj, ref)
	}
	owner, ok := ownerLabel[kind]
	if !ok {
		return Claim{}, false
	}
	if ref != nil {
		if !isOria(ref, owner.kind) {
			return Claim{}, false
		}
		return Claim{Kind: owner.kind, Name: ref.Name, UID: ref.UID}, true
	}
	if v, ok := labels[owner.label]; ok {
		return Claim{Kind: owner.kind, Label: v}, true
	}
	return Claim{}, false
}

// roleClaim is ClaimOf for a ClusterRole: a template's inline role, the
// gate of a time-bound grant (binding.GateRole: controlled by its
// ScopeInstance, labelled with it), or an extension's generated role that
// lost its controller reference.
func roleClaim(obj metav1.Object, ref *metav1.OwnerReference) (Claim, bool) {
	labels := obj.GetLabels()
	if ref != nil {
		for _, kind := range []string{ownership.KindScopeTemplate, ownership.KindScopeInstance} {
			if isOria(ref, kind) {
				return Claim{Kind: kind, Name: ref.Name, UID: ref.UID}, true
			}
		}
		return Claim{}, false
	}
	if v, ok := labels[oriav1alpha1.LabelScopeTemplate]; ok {
		return Claim{Kind: ownership.KindScopeTemplate, Label: v}, true
	}
	if v, ok := labels[oriav1alpha1.LabelScopeInstance]; ok {
		return Claim{Kind: ownership.KindScopeInstance, Label: v}, true
	}
	if v, ok := labels[oriav1alpha1.LabelExtension]; ok {
		if _, generated := obj.GetAnnotations()[oriav1alpha1.AnnotationCRD]; generated {
			return Claim{Kind: ocv1.ClusterExtensionKind, Label: v}, true
		}
	}
	return Claim{}, false
}

// isOria reports whether ref is a reference to oria's kind.
func isOria(ref *metav1.OwnerReference, kind string) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == oriav1alpha1.GroupVersion.Group && ref.Kind == kind
}

// Owners tells which owners exist.
type Owners interface {
	// Knows reports whether the other methods answer for owners of kind
	// (a view that does not hold them cannot say they are missing).
	Knows(kind string) bool
	// UID returns the UID of the owner of kind named name, and whether it
	// exists.
	UID(kind, name string) (types.UID, bool)
	// Labelled reports whether an owner of kind exists whose name has the
	// label value value (names.LabelValue).
	Labelled(kind, value string) bool
}

// OwnerSet is a complete list of the owners of some kinds: kind, name, UID.
type OwnerSet map[string]map[string]types.UID

// Knows reports whether the set lists the owners of kind.
func (s OwnerSet) Knows(kind string) bool {
	_, ok := s[kind]
	return ok
}

// UID implements Owners.
func (s OwnerSet) UID(kind, name string) (types.UID, bool) {
	uid, ok := s[kind][name]
	return uid, ok
}

// Labelled implements Owners.
func (s OwnerSet) Labelled(kind, value string) bool {
	for name := range s[kind] {
		if names.LabelValue(name) == value {
			return true
		}
	}
	return false
}

// Fate is what the sweep decided about one object: whether it is swept.
type Fate struct {
	// Orphaned: the object's owner is gone (or another object holds its
	// name); the object is to be deleted.
	Orphaned bool
	// Unknown: owners does not know the owner's kind; nothing was decided.
	Unknown bool
	// Reason says why an orphan is one (Reason* constants).
	Reason string
}

// Decide tells the fate of a claim against the owners that exist.
func Decide(c Claim, owners Owners) Fate {
	if !owners.Knows(c.Kind) {
		return Fate{Unknown: true}
	}
	if c.Name != "" {
		uid, ok := owners.UID(c.Kind, c.Name)
		switch {
		case !ok:
			return Fate{Orphaned: true, Reason: ReasonOwnerGone}
		case uid != c.UID:
			return Fate{Orphaned: true, Reason: ReasonOwnerReplaced}
		}
		return Fate{}
	}
	if !owners.Labelled(c.Kind, c.Label) {
		return Fate{Orphaned: true, Reason: ReasonNoLabelledOwner}
	}
	return Fate{}
}

// FateOf decides whether obj, of the judged kind, is an orphan: ClaimOf,
// then Decide. An object the sweep does not judge is never one.
func FateOf(kind string, obj metav1.Object, owners Owners) Fate {
	if !obj.GetDeletionTimestamp().IsZero() && len(obj.GetFinalizers()) == 0 {
		// Already going: deleting it again changes nothing. One held by
		// a finalizer still grants (the garbage collector deleted it while
		// no oria ran, say): it is judged, and engine.Delete removes the
		// finalizers.
		return Fate{}
	}
	c, ok := ClaimOf(kind, obj)
	if !ok {
		return Fate{}
	}
	return Decide(c, owners)
}
