package engine

import (
	"maps"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/ownership"
)

// ClusterRoleKind is how the engine writes oria's ClusterRoles. exclusive
// are label keys oria decides on: one of them on the object that the
// desired object does not carry (an aggregation label someone added to a
// FineGrained role, widening access) is removed. An aggregationRule someone
// added (the aggregation controller would then replace the rules with those
// of every role it selects) is removed as well. Other labels, annotations
// and owner references others add are left alone.
func ClusterRoleKind(exclusive ...string) Kind[*rbacv1.ClusterRole] {
	return Kind[*rbacv1.ClusterRole]{
		Name:    "ClusterRole",
		New:     func() *rbacv1.ClusterRole { return &rbacv1.ClusterRole{} },
		Replace: Never[*rbacv1.ClusterRole],
		UpToDate: func(cur, want *rbacv1.ClusterRole) bool {
			return metaUpToDate(cur, want) && len(unwanted(cur.Labels, want.Labels, exclusive)) == 0 &&
				equality.Semantic.DeepEqual(cur.AggregationRule, want.AggregationRule) &&
				equality.Semantic.DeepEqual(cur.Rules, want.Rules)
		},
		Merge: func(cur, want *rbacv1.ClusterRole) (*rbacv1.ClusterRole, bool) {
			drop := unwanted(cur.Labels, want.Labels, exclusive)
			if len(drop) == 0 && controlled(cur, want) && equality.Semantic.DeepEqual(cur.AggregationRule, want.AggregationRule) {
				return nil, false
			}
			out := cur.DeepCopy()
			mergeMeta(out, want, drop)
			out.AggregationRule = want.AggregationRule
			out.Rules = want.Rules
			return out, true
		},
	}
}

// RoleBindingKind is how the engine writes oria's RoleBindings.
var RoleBindingKind = bindingKind("RoleBinding", func() *rbacv1.RoleBinding { return &rbacv1.RoleBinding{} },
	func(b *rbacv1.RoleBinding) (*rbacv1.RoleRef, *[]rbacv1.Subject) { return &b.RoleRef, &b.Subjects })

// ClusterRoleBindingKind is how the engine writes oria's
// ClusterRoleBindings.
var ClusterRoleBindingKind = bindingKind("ClusterRoleBinding", func() *rbacv1.ClusterRoleBinding { return &rbacv1.ClusterRoleBinding{} },
	func(b *rbacv1.ClusterRoleBinding) (*rbacv1.RoleRef, *[]rbacv1.Subject) {
		return &b.RoleRef, &b.Subjects
	})

// bindingKind describes a binding kind whose roleRef and subjects parts
// returns: the roleRef is immutable (a different one means delete and
// create), the subjects are compared as the API server stores them, field
// by field (a Subject is a comparable struct of strings; a reflective
// comparison was most of an unchanged reconcile's cost: docs/benchmarks.md,
// History, ec140d3).
func bindingKind[T client.Object](name string, newT func() T, parts func(T) (*rbacv1.RoleRef, *[]rbacv1.Subject)) Kind[T] {
	return Kind[T]{
		Name: name,
		New:  newT,
		UpToDate: func(cur, want T) bool {
			curRef, curSubj := parts(cur)
			wantRef, wantSubj := parts(want)
			return metaUpToDate(cur, want) && *curRef == *wantRef && slices.Equal(*curSubj, *wantSubj)
		},
		Replace: func(cur, want T) bool {
			curRef, _ := parts(cur)
			wantRef, _ := parts(want)
			return *curRef != *wantRef
		},
		Merge: func(cur, want T) (T, bool) {
			if controlled(cur, want) {
				var zero T
				return zero, false
			}
			out := cur.DeepCopyObject().(T)
			mergeMeta(out, want, nil)
			_, outSubj := parts(out)
			_, wantSubj := parts(want)
			*outSubj = *wantSubj
			return out, true
		},
	}
}

// metaUpToDate reports whether cur has want's labels, annotations,
// controller reference, its other owner references exactly (one that
// blocks the deletion of another owner), and its finalizers.
func metaUpToDate(cur, want metav1.Object) bool {
	return ownership.HasLabels(cur.GetLabels(), want.GetLabels()) &&
		ownership.HasLabels(cur.GetAnnotations(), want.GetAnnotations()) &&
		controlled(cur, want) && holds(cur, want) &&
		!slices.ContainsFunc(want.GetFinalizers(), func(f string) bool { return !slices.Contains(cur.GetFinalizers(), f) })
}

// holds reports whether cur has every owner reference of want after its
// first (the controller), exactly.
func holds(cur, want metav1.Object) bool {
	refs := want.GetOwnerReferences()
	for i := 1; i < len(refs); i++ {
		if !slices.ContainsFunc(cur.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return sameRef(r, refs[i]) }) {
			return false
		}
	}
	return true
}

// sameRef compares owner references field by field (no reflection: an
// unchanged reconcile compares one per binding).
func sameRef(a, b metav1.OwnerReference) bool {
	return a.UID == b.UID && a.Name == b.Name && a.Kind == b.Kind && a.APIVersion == b.APIVersion &&
		ptr.Deref(a.Controller, false) == ptr.Deref(b.Controller, false) &&
		ptr.Deref(a.BlockOwnerDeletion, false) == ptr.Deref(b.BlockOwnerDeletion, false)
}

// controlled reports whether cur's controller is want's.
func controlled(cur, want metav1.Object) bool {
	refs := want.GetOwnerReferences()
	return len(refs) == 0 || ownership.IsControlledBy(cur.GetOwnerReferences(), refs[0])
}

// mergeMeta sets want's labels (less drop), annotations, owner references
// (its first is the controller) and finalizers on out. Other references
// are kept, but for those of the same UIDs; every other controller
// reference goes. A finalizer is not added to an object being deleted (the
// API server refuses it).
func mergeMeta(out, want metav1.Object, drop []string) {
	labels := maps.Clone(out.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	for _, k := range drop {
		delete(labels, k)
	}
	maps.Copy(labels, want.GetLabels())
	out.SetLabels(labels)
	if len(want.GetAnnotations()) > 0 {
		ann := maps.Clone(out.GetAnnotations())
		if ann == nil {
			ann = map[string]string{}
		}
		maps.Copy(ann, want.GetAnnotations())
		out.SetAnnotations(ann)
	}
	if refs := want.GetOwnerReferences(); len(refs) > 0 {
		kept := slices.DeleteFunc(slices.Clone(out.GetOwnerReferences()), func(r metav1.OwnerReference) bool {
			return ptr.Deref(r.Controller, false) || slices.ContainsFunc(refs, func(w metav1.OwnerReference) bool { return w.UID == r.UID })
		})
		out.SetOwnerReferences(append(kept, refs...))
	}
	if out.GetDeletionTimestamp().IsZero() {
		fins := slices.Clone(out.GetFinalizers())
		for _, f := range want.GetFinalizers() {
			if !slices.Contains(fins, f) {
				fins = append(fins, f)
			}
		}
		out.SetFinalizers(fins)
	}
}

// unwanted returns, sorted, the keys of exclusive that have carries and
// want does not.
func unwanted(have, want map[string]string, exclusive []string) []string {
	var out []string
	for _, k := range exclusive {
		if _, ok := want[k]; ok {
			continue
		}
		if _, ok := have[k]; ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// WholeClusterRoleKind is how the engine writes a ClusterRole that must
// be exactly as oria computes it: its labels are exactly the desired ones
// (a label someone adds could make an aggregated role select it), it has
// no aggregationRule, and its rules are exactly the desired ones. Every
// change is one update of the whole role: an apply leaving the rules out
// would not remove rules the create wrote (another field manager entry).
func WholeClusterRoleKind() Kind[*rbacv1.ClusterRole] {
	return Kind[*rbacv1.ClusterRole]{
		Name:    "ClusterRole",
		New:     func() *rbacv1.ClusterRole { return &rbacv1.ClusterRole{} },
		Replace: Never[*rbacv1.ClusterRole],
		UpToDate: func(cur, want *rbacv1.ClusterRole) bool {
			return maps.Equal(cur.Labels, want.Labels) && metaUpToDate(cur, want) && cur.AggregationRule == nil &&
				equality.Semantic.DeepEqual(cur.Rules, want.Rules)
		},
		Merge: func(cur, want *rbacv1.ClusterRole) (*rbacv1.ClusterRole, bool) {
			out := cur.DeepCopy()
			mergeMeta(out, want, nil)
			out.Labels = maps.Clone(want.Labels)
			out.AggregationRule = nil
			out.Rules = want.Rules
			return out, true
		},
	}
}
