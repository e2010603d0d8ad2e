package ownership

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
)

func TestOwnership(t *testing.T) {
	ceRef := func(name, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "olm.operatorframework.io/v1", Kind: "ClusterExtension", Name: name, UID: types.UID(uid), Controller: ptr.To(true)}}
	}
	oriaLabels := func(ext string) map[string]string {
		return map[string]string{oriav1alpha1.LabelManaged: oriav1alpha1.ManagedValue, oriav1alpha1.LabelExtension: ext}
	}
	bundleLabels := func(ext string) map[string]string {
		return map[string]string{oriav1alpha1.LabelOLMOwnerKind: "ClusterExtension", oriav1alpha1.LabelOLMOwnerName: ext}
	}
	ext := struct {
		Name string
		UID  types.UID
	}{Name: "argocd", UID: "uid-1"}
	tests := []struct {
		name                      string
		meta                      metav1.ObjectMeta
		oria, controlled, bundled bool
	}{
		{"oria's", metav1.ObjectMeta{Labels: oriaLabels("argocd"), OwnerReferences: ceRef("argocd", "uid-1")}, true, true, false},
		{"oria's, earlier incarnation of the extension", metav1.ObjectMeta{Labels: oriaLabels("argocd"), OwnerReferences: ceRef("argocd", "uid-0")}, true, false, false},
		{"oria's, owner reference removed, annotation kept", metav1.ObjectMeta{Labels: oriaLabels("argocd"), Annotations: map[string]string{oriav1alpha1.AnnotationCRD: "x"}}, true, false, false},
		{"oria-labelled, no owner, no annotation", metav1.ObjectMeta{Labels: oriaLabels("argocd")}, false, false, false},
		{"oria's for another extension", metav1.ObjectMeta{Labels: oriaLabels("other"), OwnerReferences: ceRef("other", "uid-2")}, false, false, false},
		{"labelled for this extension, controlled by another", metav1.ObjectMeta{Labels: oriaLabels("argocd"), OwnerReferences: ceRef("other", "uid-2")}, false, false, false},
		{"labels stripped, owner reference kept", metav1.ObjectMeta{OwnerReferences: ceRef("argocd", "uid-1")}, false, true, false},
		{"bundle-provided for this extension", metav1.ObjectMeta{Labels: bundleLabels("argocd")}, false, false, true},
		{"bundle-provided for another extension", metav1.ObjectMeta{Labels: bundleLabels("other")}, false, false, false},
		{"oria's, adopted by the extension's Helm release since", metav1.ObjectMeta{
			Labels: merged(oriaLabels("argocd"), bundleLabels("argocd")), OwnerReferences: ceRef("argocd", "uid-1"),
		}, false, false, true},
		{"oria's, owner labels of another extension added", metav1.ObjectMeta{
			Labels: merged(oriaLabels("argocd"), bundleLabels("other")), OwnerReferences: ceRef("argocd", "uid-1"),
		}, false, false, false},
		{"labelled managed-by=oria only (the conventional label says nothing)", metav1.ObjectMeta{
			Labels:      map[string]string{oriav1alpha1.LabelManagedBy: oriav1alpha1.ManagedByValue, oriav1alpha1.LabelExtension: "argocd"},
			Annotations: map[string]string{oriav1alpha1.AnnotationCRD: "x"},
		}, false, false, false},
		{"unrelated", metav1.ObjectMeta{Labels: map[string]string{"app": "x"}}, false, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cr := &rbacv1.ClusterRole{ObjectMeta: tc.meta}
			got := [2]bool{ExtensionOwns(cr, ext.Name, ext.UID), IsBundleRole(cr, ext.Name)}
			if diff := cmp.Diff([2]bool{tc.oria || tc.controlled, tc.bundled}, got); diff != "" {
				t.Errorf("[ExtensionOwns IsBundleRole] (-want +got):\n%s", diff)
			}
		})
	}
}

func merged(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// TestInstanceOwner: oria's labels (with a long name's hashed label value)
// or a controller reference to the instance; another instance's is not.
func TestInstanceOwner(t *testing.T) {
	long := strings.Repeat("i", 70)
	for _, name := range []string{"inst", long} {
		labelled := &metav1.ObjectMeta{Labels: map[string]string{
			oriav1alpha1.LabelManaged: oriav1alpha1.ManagedValue, oriav1alpha1.LabelScopeInstance: names.LabelValue(name)}}
		controlled := &metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{Ref(KindScopeInstance, name, "uid")}}
		another := &metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{Ref(KindScopeInstance, name+"x", "uid")}}
		owns := InstanceOwner(name)
		if !owns(labelled) || !owns(controlled) || owns(another) || owns(&metav1.ObjectMeta{}) {
			t.Errorf("%.10s: labelled %v, controlled %v, another's %v, bare %v", name, owns(labelled), owns(controlled), owns(another), owns(&metav1.ObjectMeta{}))
		}
	}
}

func TestInlineRoleOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		meta metav1.ObjectMeta
		want string
	}{
		{"a template's inline role", metav1.ObjectMeta{Labels: TemplateLabels("admins")}, "admins"},
		{"controlled by a template, labels gone", metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{Ref(KindScopeTemplate, "admins", "uid")}}, "admins"},
		{"a plain role", metav1.ObjectMeta{}, ""},
		{"the template label without oria's", metav1.ObjectMeta{Labels: map[string]string{oriav1alpha1.LabelScopeTemplate: "admins"}}, ""},
		{"an extension role", metav1.ObjectMeta{Labels: ExtensionRoleLabels("argocd", names.RoleView)}, ""},
		{"a gate", metav1.ObjectMeta{Labels: GateLabels("si")}, ""},
	} {
		if got := InlineRoleOf(&rbacv1.ClusterRole{ObjectMeta: tc.meta}); got != tc.want {
			t.Errorf("%s: InlineRoleOf = %q, want %q", tc.name, got, tc.want)
		}
	}
}
