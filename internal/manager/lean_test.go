package manager

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func leanBinding(ns, instance string, subjects ...string) *rbacv1.RoleBinding {
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{
			Name: instance + "-view", Namespace: ns, UID: types.UID("uid-" + ns),
			Labels: map[string]string{"app.kubernetes.io/managed-by": "oria", "oria.operatorframework.io/scope-instance": instance},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "oria.operatorframework.io/v1alpha1", Kind: "ScopeInstance", Name: instance,
				UID: "instance-uid", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "oria"}},
		},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
	}
	for _, s := range subjects {
		rb.Subjects = append(rb.Subjects, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: s})
	}
	return rb
}

// lean is one cache's transform: the objects it transforms share parts.
var lean = LeanBindings()

func transform(t *testing.T, obj any) any {
	t.Helper()
	out, err := lean(obj)
	if err != nil {
		t.Fatalf("transform: %v", err)
	}
	return out
}

func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func TestLeanBindingsKeepsContentAndShares(t *testing.T) {
	a, b := leanBinding("team-a", "inst", "readers"), leanBinding("team-b", "inst", "readers")
	wantA, wantB := a.DeepCopy(), b.DeepCopy()
	wantA.ManagedFields, wantB.ManagedFields = nil, nil

	gotA, gotB := transform(t, a).(*rbacv1.RoleBinding), transform(t, b).(*rbacv1.RoleBinding)
	if d := cmp.Diff(wantA, gotA); d != "" {
		t.Errorf("first binding changed (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantB, gotB); d != "" {
		t.Errorf("second binding changed (-want +got):\n%s", d)
	}
	if !sameMap(gotA.Labels, gotB.Labels) {
		t.Error("equal labels are not shared")
	}
	if &gotA.OwnerReferences[0] != &gotB.OwnerReferences[0] {
		t.Error("equal owner references are not shared")
	}
	if &gotA.Subjects[0] != &gotB.Subjects[0] {
		t.Error("equal subjects are not shared")
	}
	if gotA.UID == gotB.UID {
		t.Error("UIDs must stay each object's own")
	}
}

func TestLeanBindingsDifferentPartsStayApart(t *testing.T) {
	a := transform(t, leanBinding("ns", "one", "readers")).(*rbacv1.RoleBinding)
	b := transform(t, leanBinding("ns", "two", "writers")).(*rbacv1.RoleBinding)
	if sameMap(a.Labels, b.Labels) || a.Labels["oria.operatorframework.io/scope-instance"] != "one" ||
		b.Labels["oria.operatorframework.io/scope-instance"] != "two" {
		t.Errorf("labels mixed up: %v / %v", a.Labels, b.Labels)
	}
	if a.OwnerReferences[0].Name != "one" || b.OwnerReferences[0].Name != "two" {
		t.Errorf("owners mixed up: %v / %v", a.OwnerReferences, b.OwnerReferences)
	}
	if a.Subjects[0].Name != "readers" || b.Subjects[0].Name != "writers" {
		t.Errorf("subjects mixed up: %v / %v", a.Subjects, b.Subjects)
	}
	// A controller flag is part of what is shared: a reference that is not
	// the controller must not become one.
	c := leanBinding("ns", "one", "readers")
	c.OwnerReferences[0].Controller = nil
	gotC := transform(t, c).(*rbacv1.RoleBinding)
	if gotC.OwnerReferences[0].Controller != nil {
		t.Error("a non-controller reference was replaced by a controller reference")
	}
}

func TestLeanBindingsClusterRoleBindingsAndOthers(t *testing.T) {
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{"a": "b"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
	}
	got := transform(t, crb).(*rbacv1.ClusterRoleBinding)
	if got.ManagedFields != nil || got.Labels["a"] != "b" || got.RoleRef.Name != "view" {
		t.Errorf("ClusterRoleBinding not transformed as intended: %+v", got)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
	if out := transform(t, cm).(*corev1.ConfigMap); out.ManagedFields != nil {
		t.Error("managedFields kept on another kind")
	}
}

func TestInternTableStartsAfreshWhenFull(t *testing.T) {
	in := newInterner()
	for i := range internLimit + 10 {
		s := fmt.Sprintf("name-%d", i)
		if got := in.str(s); got != s {
			t.Fatalf("str(%q) = %q", s, got)
		}
	}
	if n := len(in.strs); n > internLimit {
		t.Errorf("table holds %d strings, limit %d", n, internLimit)
	}
}
