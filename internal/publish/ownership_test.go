package publish

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

func TestCreation(t *testing.T) {
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "inst", UID: "uid-1"}}
	got := Creation(si, oriav1alpha1.ConfigMapKeyReference{Namespace: "op", Name: "scope"})
	want := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "op", Name: "scope", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "oria.operatorframework.io/v1alpha1", Kind: "ScopeInstance", Name: "inst", UID: "uid-1",
	}}}}
	// Nothing but the ownerReference: the key, label and annotation are
	// applied (and withdrawn) by server-side apply; not a controller
	// reference, no blockOwnerDeletion.
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Creation (-want +got):\n%s", diff)
	}
	if !OwnedBy(got.OwnerReferences, "uid-1") {
		t.Error("the created ConfigMap is not owned by its instance")
	}
}

func TestOwnedBy(t *testing.T) {
	ref := func(apiVersion, kind string, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "inst", UID: types.UID(uid)}}
	}
	gv := oriav1alpha1.GroupVersion.String()
	for _, tc := range []struct {
		name string
		refs []metav1.OwnerReference
		uid  string
		want bool
	}{
		{"its reference", ref(gv, "ScopeInstance", "u"), "u", true},
		{"another version of the group", ref("oria.operatorframework.io/v1", "ScopeInstance", "u"), "u", true},
		{"another instance (UID)", ref(gv, "ScopeInstance", "v"), "u", false},
		{"another kind", ref(gv, "ScopeTemplate", "u"), "u", false},
		{"another group", ref("example.com/v1", "ScopeInstance", "u"), "u", false},
		{"no reference", nil, "u", false},
		// An instance known only by name (deleted) owns nothing, whatever
		// the ConfigMap says.
		{"unknown UID", ref(gv, "ScopeInstance", ""), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := OwnedBy(tc.refs, types.UID(tc.uid)); got != tc.want {
				t.Errorf("OwnedBy = %v, want %v", got, tc.want)
			}
		})
	}
}

// forged is the ConfigMap of case 7 of issue 29: a user who may patch it
// wrote oria's label, an annotation naming an instance, and gave every
// field to oria's publication field manager; nothing is left after the
// withdrawal.
func forged(refs ...metav1.OwnerReference) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Labels:          map[string]string{oriav1alpha1.LabelPublished: "true"},
		Annotations:     map[string]string{AnnotationKey("ghost"): "namespaces"},
		ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: FieldOwner("ghost"), Operation: metav1.ManagedFieldsOperationApply}},
		OwnerReferences: refs,
	}}
}

func TestDispose(t *testing.T) {
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "inst", UID: "uid-1"}}
	mine := OwnerReference(si)
	other := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "op", UID: "uid-2"}
	oriaOnly := []metav1.ManagedFieldsEntry{{Manager: FieldOwner("inst"), Operation: metav1.ManagedFieldsOperationUpdate}}
	cm := func(data map[string]string, binary map[string][]byte, managed []metav1.ManagedFieldsEntry, refs ...metav1.OwnerReference) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{OwnerReferences: refs, ManagedFields: managed}, Data: data, BinaryData: binary}
	}
	for _, tc := range []struct {
		name string
		cm   *corev1.ConfigMap
		uid  string
		want Disposal
	}{
		{"created for the instance, empty", cm(nil, nil, oriaOnly, mine), "uid-1", Delete},
		{"created for the instance, someone's key left", cm(map[string]string{"theirs": "x"}, nil, oriaOnly, mine), "uid-1", Disown},
		{"created for the instance, someone's binary key left", cm(nil, map[string][]byte{"b": nil}, oriaOnly, mine), "uid-1", Disown},
		{"created for the instance, someone else wrote it", cm(nil, nil, append(oriaOnly, metav1.ManagedFieldsEntry{Manager: "kubectl-edit"}), mine), "uid-1", Disown},
		{"created for the instance, another owner too", cm(nil, nil, oriaOnly, mine, other), "uid-1", Disown},
		{"not created by oria (no reference), empty, oria's manager only", cm(nil, nil, oriaOnly), "uid-1", Keep},
		{"created for another instance", cm(nil, nil, oriaOnly, mine), "uid-9", Keep},
		{"case 7: forged label, annotation and field manager", forged(), "uid-1", Keep},
		{"case 7 for an instance known by name only", forged(mine), "", Keep},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Dispose(tc.cm, types.UID(tc.uid)); got != tc.want {
				t.Errorf("Dispose = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestShared(t *testing.T) {
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "inst", UID: "uid-1"}}
	mine := []metav1.OwnerReference{OwnerReference(si)}
	for _, tc := range []struct {
		name   string
		refs   []metav1.OwnerReference
		data   map[string]string
		binary map[string][]byte
		want   bool
	}{
		{"its key only", mine, map[string]string{"namespaces": "a"}, nil, false},
		{"empty", mine, nil, nil, false},
		{"another key", mine, map[string]string{"namespaces": "a", "theirs": "x"}, nil, true},
		{"another binary key", mine, map[string]string{"namespaces": "a"}, map[string][]byte{"b": nil}, true},
		{"not created for it", nil, map[string]string{"namespaces": "a", "theirs": "x"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{OwnerReferences: tc.refs}, Data: tc.data, BinaryData: tc.binary}
			if got := Shared(cm, "uid-1", "namespaces"); got != tc.want {
				t.Errorf("Shared = %v, want %v", got, tc.want)
			}
		})
	}
}
