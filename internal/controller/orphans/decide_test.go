package orphans

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/ownership"
)

// obj is an object's metadata with oria's managed-by label, extra labels,
// owner references and annotations.
func obj(labels map[string]string, refs []metav1.OwnerReference, annotations map[string]string) *metav1.ObjectMeta {
	l := map[string]string{oriav1alpha1.LabelManaged: oriav1alpha1.ManagedValue}
	for k, v := range labels {
		l[k] = v
	}
	return &metav1.ObjectMeta{Name: "x", Labels: l, OwnerReferences: refs, Annotations: annotations}
}

func TestFateOf(t *testing.T) {
	long := strings.Repeat("a", 80) // its label value is hashed
	owners := OwnerSet{
		ownership.KindScopeInstance: {"si": "uid-si", long: "uid-long"},
		ownership.KindScopeTemplate: {"tmpl": "uid-tmpl"},
		ownership.KindRBACPolicy:    {"policy": "uid-policy"},
		ocv1.ClusterExtensionKind:   {"ext": "uid-ext"},
	}
	instanceRef := func(name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{ownership.Ref(ownership.KindScopeInstance, name, uid)}
	}
	instanceLabel := func(name string) map[string]string {
		return map[string]string{oriav1alpha1.LabelScopeInstance: names.LabelValue(name)}
	}
	crd := map[string]string{oriav1alpha1.AnnotationCRD: "things.example.com"}
	deleting := obj(instanceLabel("gone"), nil, nil)
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	held := obj(instanceLabel("gone"), nil, nil)
	held.DeletionTimestamp = ptr.To(metav1.Now())
	held.Finalizers = []string{"example.com/keep-me"}
	for _, tc := range []struct {
		name   string
		kind   string
		obj    metav1.Object
		owners Owners
		want   Fate
	}{
		// Bindings.
		{name: "binding of a living instance", kind: KindRoleBinding,
			obj: obj(instanceLabel("si"), instanceRef("si", "uid-si"), nil)},
		{name: "binding of a missing instance", kind: KindRoleBinding,
			obj:  obj(instanceLabel("gone"), instanceRef("gone", "uid-gone"), nil),
			want: Fate{Orphaned: true, Reason: ReasonOwnerGone}},
		{name: "binding of an instance re-created under its name", kind: KindClusterRoleBinding,
			obj:  obj(instanceLabel("si"), instanceRef("si", "uid-old"), nil),
			want: Fate{Orphaned: true, Reason: ReasonOwnerReplaced}},
		{name: "the controller reference decides, not the label", kind: KindRoleBinding,
			obj:  obj(instanceLabel("si"), instanceRef("gone", "uid-gone"), nil),
			want: Fate{Orphaned: true, Reason: ReasonOwnerGone}},
		{name: "orphaned by the garbage collector: label of a missing instance", kind: KindRoleBinding,
			obj:  obj(instanceLabel("gone"), nil, nil),
			want: Fate{Orphaned: true, Reason: ReasonNoLabelledOwner}},
		{name: "no controller reference, label of a living instance", kind: KindRoleBinding,
			obj: obj(instanceLabel("si"), nil, nil)},
		{name: "no controller reference, hashed label of a living long-named instance", kind: KindRoleBinding,
			obj: obj(instanceLabel(long), nil, nil)},
		{name: "a non-controller owner reference does not count", kind: KindRoleBinding,
			obj: obj(instanceLabel("gone"), []metav1.OwnerReference{{APIVersion: oriav1alpha1.GroupVersion.String(),
				Kind: ownership.KindScopeInstance, Name: "gone", UID: "uid-gone"}}, nil),
			want: Fate{Orphaned: true, Reason: ReasonNoLabelledOwner}},
		{name: "controlled by something else: not oria's to delete", kind: KindRoleBinding,
			obj: obj(instanceLabel("gone"), []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: ownership.KindScopeInstance,
				Name: "gone", UID: "u", Controller: ptr.To(true)}}, nil)},
		{name: "without oria's managed-by label: not judged", kind: KindRoleBinding,
			obj: &metav1.ObjectMeta{Name: "x", Labels: instanceLabel("gone")}},
		{name: "managed by oria, no owner label nor reference: not judged", kind: KindRoleBinding,
			obj: obj(nil, nil, nil)},
		{name: "already being deleted", kind: KindRoleBinding, obj: deleting},
		{name: "held in deletion by a finalizer: still grants, judged", kind: KindRoleBinding, obj: held,
			want: Fate{Orphaned: true, Reason: ReasonNoLabelledOwner}},
		{name: "a view that does not know the owner's kind decides nothing", kind: KindRoleBinding,
			obj: obj(instanceLabel("gone"), nil, nil), owners: OwnerSet{},
			want: Fate{Unknown: true}},

		// ClusterRoles.
		{name: "inline role of a living template", kind: KindClusterRole,
			obj: obj(map[string]string{oriav1alpha1.LabelScopeTemplate: "tmpl"},
				[]metav1.OwnerReference{ownership.Ref(ownership.KindScopeTemplate, "tmpl", "uid-tmpl")}, nil)},
		{name: "inline role of a missing template", kind: KindClusterRole,
			obj: obj(map[string]string{oriav1alpha1.LabelScopeTemplate: "gone"},
				[]metav1.OwnerReference{ownership.Ref(ownership.KindScopeTemplate, "gone", "uid-gone")}, nil),
			want: Fate{Orphaned: true, Reason: ReasonOwnerGone}},
		{name: "inline role of a re-created template", kind: KindClusterRole,
			obj: obj(map[string]string{oriav1alpha1.LabelScopeTemplate: "tmpl"},
				[]metav1.OwnerReference{ownership.Ref(ownership.KindScopeTemplate, "tmpl", "uid-old")}, nil),
			want: Fate{Orphaned: true, Reason: ReasonOwnerReplaced}},
		{name: "inline role orphaned by the garbage collector", kind: KindClusterRole,
			obj:  obj(map[string]string{oriav1alpha1.LabelScopeTemplate: "gone"}, nil, nil),
			want: Fate{Orphaned: true, Reason: ReasonNoLabelledOwner}},
		{name: "extension role controlled by a missing extension: the extension controller's", kind: KindClusterRole,
			obj: obj(map[string]string{oriav1alpha1.LabelExtension: "gone"},
				[]metav1.OwnerReference{ownership.ExtensionRef("gone", "uid-gone")}, crd)},
		{name: "extension role orphaned by the garbage collector", kind: KindClusterRole,
			obj:  obj(map[string]string{oriav1alpha1.LabelExtension: "gone"}, nil, crd),
			want: Fate{Orphaned: true, Reason: ReasonNoLabelledOwner}},
		{name: "extension role without a controller reference, extension living", kind: KindClusterRole,
			obj: obj(map[string]string{oriav1alpha1.LabelExtension: "ext"}, nil, crd)},
		{name: "extension label without the generated-role annotation: not judged", kind: KindClusterRole,
			obj: obj(map[string]string{oriav1alpha1.LabelExtension: "gone"}, nil, nil)},
		{name: "extension role, the ClusterExtension API unknown", kind: KindClusterRole,
			obj: obj(map[string]string{oriav1alpha1.LabelExtension: "gone"}, nil, crd), owners: OwnerSet{ownership.KindScopeTemplate: {}},
			want: Fate{Unknown: true}},

		// Gates: a time-bound grant's ClusterRole, controlled by its
		// instance and labelled with it (ownership.GateLabels).
		{name: "gate of a living instance", kind: KindClusterRole,
			obj: obj(instanceLabel("si"), instanceRef("si", "uid-si"), nil)},
		{name: "gate of a missing instance", kind: KindClusterRole,
			obj:  obj(instanceLabel("gone"), instanceRef("gone", "uid-gone"), nil),
			want: Fate{Orphaned: true, Reason: ReasonOwnerGone}},
		{name: "gate of an instance re-created under its name", kind: KindClusterRole,
			obj:  obj(instanceLabel("si"), instanceRef("si", "uid-old"), nil),
			want: Fate{Orphaned: true, Reason: ReasonOwnerReplaced}},
		{name: "gate orphaned by the garbage collector: label of a missing instance", kind: KindClusterRole,
			obj:  obj(instanceLabel("gone"), nil, nil),
			want: Fate{Orphaned: true, Reason: ReasonNoLabelledOwner}},
		{name: "gate without a controller reference, label of a living instance", kind: KindClusterRole,
			obj: obj(instanceLabel(long), nil, nil)},
		{name: "role controlled by something else than a template or an instance: not judged", kind: KindClusterRole,
			obj: obj(instanceLabel("gone"), []metav1.OwnerReference{ownership.Ref(ownership.KindRBACPolicy, "gone", "uid-gone")}, nil)},

		// Compiled ScopeTemplates and ScopeInstances.
		{name: "compiled instance of a living policy", kind: KindScopeInstance,
			obj: obj(map[string]string{oriav1alpha1.LabelRBACPolicy: "policy"},
				[]metav1.OwnerReference{ownership.Ref(ownership.KindRBACPolicy, "policy", "uid-policy")}, nil)},
		{name: "compiled template of a missing policy", kind: KindScopeTemplate,
			obj: obj(map[string]string{oriav1alpha1.LabelRBACPolicy: "gone"},
				[]metav1.OwnerReference{ownership.Ref(ownership.KindRBACPolicy, "gone", "uid-gone")}, nil),
			want: Fate{Orphaned: true, Reason: ReasonOwnerGone}},
		{name: "compiled instance of a re-created policy", kind: KindScopeInstance,
			obj: obj(map[string]string{oriav1alpha1.LabelRBACPolicy: "policy"},
				[]metav1.OwnerReference{ownership.Ref(ownership.KindRBACPolicy, "policy", "uid-old")}, nil),
			want: Fate{Orphaned: true, Reason: ReasonOwnerReplaced}},
		{name: "compiled instance orphaned by the garbage collector", kind: KindScopeInstance,
			obj:  obj(map[string]string{oriav1alpha1.LabelRBACPolicy: "gone"}, nil, nil),
			want: Fate{Orphaned: true, Reason: ReasonNoLabelledOwner}},
		{name: "a user's instance (nothing compiled it): not judged", kind: KindScopeInstance,
			obj: &metav1.ObjectMeta{Name: "x"}},
		{name: "a user's instance controlled by something else: not judged", kind: KindScopeInstance,
			obj: obj(nil, []metav1.OwnerReference{ownership.Ref(ownership.KindScopeTemplate, "tmpl", "uid-tmpl")}, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.owners
			if o == nil {
				o = owners
			}
			if diff := cmp.Diff(tc.want, FateOf(tc.kind, tc.obj, o)); diff != "" {
				t.Errorf("FateOf (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClaimOf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		kind   string
		obj    metav1.Object
		want   Claim
		wantOK bool
	}{
		{name: "by controller reference", kind: KindRoleBinding,
			obj:  obj(map[string]string{oriav1alpha1.LabelScopeInstance: "label"}, []metav1.OwnerReference{ownership.Ref(ownership.KindScopeInstance, "si", "u")}, nil),
			want: Claim{Kind: ownership.KindScopeInstance, Name: "si", UID: "u"}, wantOK: true},
		{name: "by label", kind: KindClusterRoleBinding,
			obj:  obj(map[string]string{oriav1alpha1.LabelScopeInstance: "label"}, nil, nil),
			want: Claim{Kind: ownership.KindScopeInstance, Label: "label"}, wantOK: true},
		{name: "an inline role by label", kind: KindClusterRole,
			obj:  obj(map[string]string{oriav1alpha1.LabelScopeTemplate: "t"}, nil, nil),
			want: Claim{Kind: ownership.KindScopeTemplate, Label: "t"}, wantOK: true},
		{name: "a gate by controller reference", kind: KindClusterRole,
			obj:  obj(map[string]string{oriav1alpha1.LabelScopeInstance: "label"}, []metav1.OwnerReference{ownership.Ref(ownership.KindScopeInstance, "si", "u")}, nil),
			want: Claim{Kind: ownership.KindScopeInstance, Name: "si", UID: "u"}, wantOK: true},
		{name: "a gate by label", kind: KindClusterRole,
			obj:  obj(map[string]string{oriav1alpha1.LabelScopeInstance: "label"}, nil, nil),
			want: Claim{Kind: ownership.KindScopeInstance, Label: "label"}, wantOK: true},
		{name: "a compiled template by label", kind: KindScopeTemplate,
			obj:  obj(map[string]string{oriav1alpha1.LabelRBACPolicy: "p"}, nil, nil),
			want: Claim{Kind: ownership.KindRBACPolicy, Label: "p"}, wantOK: true},
		{name: "a kind the sweep does not judge", kind: "ConfigMap",
			obj: obj(map[string]string{oriav1alpha1.LabelScopeInstance: "label"}, nil, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ClaimOf(tc.kind, tc.obj)
			if diff := cmp.Diff(tc.want, got); diff != "" || ok != tc.wantOK {
				t.Errorf("ClaimOf = %v (-want +got):\n%s", ok, diff)
			}
		})
	}
}

func TestBoundTo(t *testing.T) {
	rb := func(ns, name, kind, role string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, RoleRef: rbacv1.RoleRef{Kind: kind, Name: role}}
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "crb"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "gate"}}
	for _, tc := range []struct {
		name string
		rbs  []*rbacv1.RoleBinding
		crbs []*rbacv1.ClusterRoleBinding
		want []string
	}{
		{name: "none"},
		{name: "bindings of the gate, and of other roles",
			rbs:  []*rbacv1.RoleBinding{rb("a", "x", "ClusterRole", "gate"), rb("b", "y", "ClusterRole", "other"), rb("c", "z", "ClusterRole", "gate")},
			crbs: []*rbacv1.ClusterRoleBinding{crb}, want: []string{"a/x", "c/z", "crb"}},
		{name: "a namespaced Role of the gate's name is not the gate",
			rbs: []*rbacv1.RoleBinding{rb("a", "x", "Role", "gate")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, boundTo("gate", tc.rbs, tc.crbs)); diff != "" {
				t.Errorf("boundTo (-want +got):\n%s", diff)
			}
		})
	}
}
