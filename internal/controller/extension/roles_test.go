package extension

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/olm"
)

// role is the comparable essence of a generated ClusterRole.
type role struct {
	Name        string
	Labels      map[string]string
	Annotations map[string]string
	Owner       string
	Rules       []rbacv1.PolicyRule
}

func essence(acs []*rbacv1.ClusterRole) []role {
	var out []role
	for _, ac := range acs {
		r := role{Name: ac.Name, Labels: ac.Labels, Annotations: ac.Annotations, Rules: ac.Rules}
		for _, o := range ac.OwnerReferences {
			r.Owner += o.APIVersion + "/" + o.Kind + "/" + o.Name + "/" +
				string(o.UID) + map[bool]string{true: "/controller"}[ptr.Deref(o.Controller, false)]
		}
		out = append(out, r)
	}
	return out
}

func TestDesiredRoles(t *testing.T) {
	ext := Extension{Name: "argocd", UID: types.UID("uid-1"), Namespace: "argocd-system"}
	owner := "olm.operatorframework.io/v1/ClusterExtension/argocd/uid-1/controller"
	labels := func(ext, kind string, agg ...string) map[string]string {
		l := map[string]string{
			oriav1alpha1.LabelManaged:   oriav1alpha1.ManagedValue,
			oriav1alpha1.LabelManagedBy: oriav1alpha1.ManagedByHelm,
			oriav1alpha1.LabelExtension: ext,
			oriav1alpha1.LabelRole:      kind,
		}
		for _, a := range agg {
			l[a] = "true"
		}
		return l
	}
	crdAnn := func(crd string) map[string]string {
		return map[string]string{
			oriav1alpha1.AnnotationCRD:                  crd,
			oriav1alpha1.AnnotationHelmReleaseName:      "argocd",
			oriav1alpha1.AnnotationHelmReleaseNamespace: "argocd-system",
		}
	}
	resRule := func(group, plural string, verbs ...string) []rbacv1.PolicyRule {
		return []rbacv1.PolicyRule{{APIGroups: []string{group}, Resources: []string{plural}, Verbs: verbs}}
	}
	crdRule := func(crd string) []rbacv1.PolicyRule {
		return []rbacv1.PolicyRule{{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"},
			ResourceNames: []string{crd}, Verbs: []string{"get"}}}
	}
	fourRoles := func(crd, group, plural, extLabel string, legacy bool) []role {
		agg := func(l string) []string {
			if legacy {
				return []string{l}
			}
			return nil
		}
		return []role{
			{Name: crd + "-admin", Labels: labels(extLabel, "admin", agg(oriav1alpha1.LabelAggregateToAdmin)...), Annotations: crdAnn(crd), Owner: owner, Rules: resRule(group, plural, "*")},
			{Name: crd + "-edit", Labels: labels(extLabel, "edit", agg(oriav1alpha1.LabelAggregateToEdit)...), Annotations: crdAnn(crd), Owner: owner, Rules: resRule(group, plural, "create", "update", "patch", "delete")},
			{Name: crd + "-view", Labels: labels(extLabel, "view", agg(oriav1alpha1.LabelAggregateToView)...), Annotations: crdAnn(crd), Owner: owner, Rules: resRule(group, plural, "get", "list", "watch")},
			{Name: crd + "-view-crdview", Labels: labels(extLabel, "view-crdview", agg(oriav1alpha1.LabelAggregateToView)...), Annotations: crdAnn(crd), Owner: owner, Rules: crdRule(crd)},
		}
	}

	longGroup := strings.Repeat("g", 63) + "." + strings.Repeat("h", 63) + "." + strings.Repeat("i", 63) + "." + strings.Repeat("j", 42) + ".io"
	longCRD := "widgets." + longGroup // 245 characters: "-admin" fits, "-view-crdview" does not
	longExt := strings.Repeat("e", 100)

	tests := []struct {
		name string
		ext  Extension
		crds []string
		mode oriav1alpha1.RBACMode
		want []role
	}{
		{
			name: "legacy: four roles per CRD with aggregation labels, sorted by name",
			ext:  ext, crds: []string{"foos.example.com"}, mode: oriav1alpha1.RBACModeLegacy,
			want: fourRoles("foos.example.com", "example.com", "foos", "argocd", true),
		},
		{
			name: "fine-grained: same roles without aggregation labels",
			ext:  ext, crds: []string{"foos.example.com"}, mode: oriav1alpha1.RBACModeFineGrained,
			want: fourRoles("foos.example.com", "example.com", "foos", "argocd", false),
		},
		{
			name: "unmanaged: nothing",
			ext:  ext, crds: []string{"foos.example.com"}, mode: oriav1alpha1.RBACModeUnmanaged,
			want: nil,
		},
		{
			name: "unknown mode: nothing",
			ext:  ext, crds: []string{"foos.example.com"}, mode: "legacy",
			want: nil,
		},
		{
			name: "no CRDs: nothing",
			ext:  ext, crds: nil, mode: oriav1alpha1.RBACModeLegacy,
			want: nil,
		},
		{
			name: "several CRDs, unsorted and duplicated input: sorted, deduplicated output",
			ext:  ext, crds: []string{"zebras.zoo.io", "apps.argoproj.io", "zebras.zoo.io"}, mode: oriav1alpha1.RBACModeFineGrained,
			want: append(fourRoles("apps.argoproj.io", "argoproj.io", "apps", "argocd", false),
				fourRoles("zebras.zoo.io", "zoo.io", "zebras", "argocd", false)...),
		},
		{
			name: "multi-dot group: plural is the first segment",
			ext:  ext, crds: []string{"applicationsets.argoproj.io.example.com"}, mode: oriav1alpha1.RBACModeFineGrained,
			want: fourRoles("applicationsets.argoproj.io.example.com", "argoproj.io.example.com", "applicationsets", "argocd", false),
		},
		{
			name: "name without a dot: core group, not a panic",
			ext:  ext, crds: []string{"widgets"}, mode: oriav1alpha1.RBACModeFineGrained,
			want: fourRoles("widgets", "", "widgets", "argocd", false),
		},
		{
			name: "long extension name: label value shortened",
			ext:  Extension{Name: longExt, UID: "uid-1", Namespace: "argocd-system"}, crds: []string{"foos.example.com"}, mode: oriav1alpha1.RBACModeFineGrained,
			want: func() []role {
				rs := fourRoles("foos.example.com", "example.com", "foos", names.LabelValue(longExt), false)
				for i := range rs {
					rs[i].Owner = "olm.operatorframework.io/v1/ClusterExtension/" + longExt + "/uid-1/controller"
					rs[i].Annotations[oriav1alpha1.AnnotationHelmReleaseName] = longExt // the full name: an annotation has room
				}
				return rs
			}(),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := essence(DesiredRoles(tc.ext, tc.crds, tc.mode, nil))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("DesiredRoles (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("long CRD name: names shortened deterministically, distinct, valid; rules keep the full name", func(t *testing.T) {
		if len(longCRD) != 245 {
			t.Fatalf("fixture: CRD name has %d characters", len(longCRD))
		}
		got := DesiredRoles(ext, []string{longCRD}, oriav1alpha1.RBACModeLegacy, nil)
		again := DesiredRoles(ext, []string{longCRD}, oriav1alpha1.RBACModeLegacy, nil)
		if diff := cmp.Diff(essence(got), essence(again)); diff != "" {
			t.Fatalf("not deterministic (-first +second):\n%s", diff)
		}
		seen := map[string]bool{}
		for _, ac := range got {
			n := ac.Name
			if len(n) > names.MaxObjectName {
				t.Errorf("name %q is %d characters, over %d", n, len(n), names.MaxObjectName)
			}
			if seen[n] {
				t.Errorf("duplicate name %q", n)
			}
			seen[n] = true
			if ac.Annotations[oriav1alpha1.AnnotationCRD] != longCRD {
				t.Errorf("%s: annotation %q, want the full CRD name", n, ac.Annotations[oriav1alpha1.AnnotationCRD])
			}
		}
		if !seen[longCRD+"-admin"] || !seen[longCRD+"-view"] {
			t.Errorf("names that fit must not be shortened: %v", seen)
		}
		crdview := names.ExtensionRole(longCRD, names.RoleViewCRDView)
		if crdview == longCRD+"-view-crdview" || !seen[crdview] || !strings.HasPrefix(crdview, longCRD[:200]) {
			t.Errorf("view-crdview name %q not shortened from %q", crdview, longCRD)
		}
		want := []rbacv1.PolicyRule{{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"},
			ResourceNames: []string{longCRD}, Verbs: []string{"get"}}}
		for _, ac := range got {
			if ac.Name == crdview {
				if diff := cmp.Diff(want, ac.Rules); diff != "" {
					t.Errorf("crdview rules (-want +got):\n%s", diff)
				}
			}
		}
	})

	t.Run("never OLM v0 operator-group labels", func(t *testing.T) {
		for _, mode := range oriav1alpha1.RBACModes {
			for _, ac := range DesiredRoles(ext, []string{"foos.example.com"}, mode, nil) {
				for k := range ac.Labels {
					if strings.HasPrefix(k, "olm.opgroup.permissions") {
						t.Errorf("%s: label %s", ac.Name, k)
					}
				}
			}
		}
	})
}

func TestSplitCRDName(t *testing.T) {
	for crd, want := range map[string][2]string{
		"foos.example.com":         {"foos", "example.com"},
		"foos.a.b.c":               {"foos", "a.b.c"},
		"widgets":                  {"widgets", ""},
		"":                         {"", ""},
		".example.com":             {"", "example.com"},
		"applications.argoproj.io": {"applications", "argoproj.io"},
	} {
		p, g := names.SplitCRDName(crd)
		if diff := cmp.Diff(want, [2]string{p, g}); diff != "" {
			t.Errorf("SplitCRDName(%q) (-want +got):\n%s", crd, diff)
		}
	}
}

func TestUpToDate(t *testing.T) {
	ext := Extension{Name: "argocd", UID: "uid-1", Namespace: "argocd-system"}
	desired := func(mode oriav1alpha1.RBACMode) *rbacv1.ClusterRole {
		return DesiredRoles(ext, []string{"foos.example.com"}, mode, nil)[0] // -admin
	}
	current := func() *rbacv1.ClusterRole {
		return &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{
				Name: "foos.example.com-admin",
				Labels: map[string]string{
					oriav1alpha1.LabelManaged: "true", oriav1alpha1.LabelManagedBy: "Helm", oriav1alpha1.LabelExtension: "argocd", oriav1alpha1.LabelRole: "admin",
					oriav1alpha1.LabelAggregateToAdmin: "true", "someone.else/label": "x",
				},
				Annotations: map[string]string{
					oriav1alpha1.AnnotationCRD: "foos.example.com", "other": "y",
					oriav1alpha1.AnnotationHelmReleaseName: "argocd", oriav1alpha1.AnnotationHelmReleaseNamespace: "argocd-system",
				},
				OwnerReferences: []metav1.OwnerReference{
					{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "u2"},
					{APIVersion: "olm.operatorframework.io/v1", Kind: "ClusterExtension", Name: "argocd", UID: "uid-1", Controller: ptr.To(true)},
				},
			},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"example.com"}, Resources: []string{"foos"}, Verbs: []string{"*"}}},
		}
	}
	tests := []struct {
		name   string
		mode   oriav1alpha1.RBACMode
		mutate func(*rbacv1.ClusterRole)
		want   bool
	}{
		{"identical apart from others' labels, annotations and owners", oriav1alpha1.RBACModeLegacy, func(*rbacv1.ClusterRole) {}, true},
		{"aggregation label missing", oriav1alpha1.RBACModeLegacy, func(c *rbacv1.ClusterRole) { delete(c.Labels, oriav1alpha1.LabelAggregateToAdmin) }, false},
		{"aggregation label not wanted (FineGrained)", oriav1alpha1.RBACModeFineGrained, func(*rbacv1.ClusterRole) {}, false},
		{"label value changed", oriav1alpha1.RBACModeLegacy, func(c *rbacv1.ClusterRole) { c.Labels[oriav1alpha1.LabelRole] = "view" }, false},
		{"annotation missing", oriav1alpha1.RBACModeLegacy, func(c *rbacv1.ClusterRole) { delete(c.Annotations, oriav1alpha1.AnnotationCRD) }, false},
		{"rules edited", oriav1alpha1.RBACModeLegacy, func(c *rbacv1.ClusterRole) { c.Rules[0].Verbs = []string{"get"} }, false},
		{"rule added", oriav1alpha1.RBACModeLegacy, func(c *rbacv1.ClusterRole) { c.Rules = append(c.Rules, c.Rules[0]) }, false},
		{"owner UID differs", oriav1alpha1.RBACModeLegacy, func(c *rbacv1.ClusterRole) { c.OwnerReferences[1].UID = "uid-0" }, false},
		{"owner not controller", oriav1alpha1.RBACModeLegacy, func(c *rbacv1.ClusterRole) { c.OwnerReferences[1].Controller = nil }, false},
		{"empty vs nil resourceNames", oriav1alpha1.RBACModeLegacy, func(c *rbacv1.ClusterRole) { c.Rules[0].ResourceNames = []string{} }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cur := current()
			tc.mutate(cur)
			if got := roleKind.UpToDate(cur, desired(tc.mode)); got != tc.want {
				t.Errorf("upToDate = %v, want %v", got, tc.want)
			}
		})
	}
}

// The object created for a role is exactly the desired state (no write
// follows a create).
func TestCreatedRoleIsUpToDate(t *testing.T) {
	ext := Extension{Name: "argocd", UID: "uid-1"}
	for _, mode := range []oriav1alpha1.RBACMode{oriav1alpha1.RBACModeLegacy, oriav1alpha1.RBACModeFineGrained} {
		for _, want := range DesiredRoles(ext, []string{"foos.example.com", "widgets"}, mode, nil) {
			if !roleKind.UpToDate(want.DeepCopy(), want) {
				t.Errorf("%s/%s: created object is not up to date: %+v", mode, want.Name, want)
			}
		}
	}
}

func TestDesiredRolesSkipBundleNames(t *testing.T) {
	ext := Extension{Name: "argocd", UID: "uid-1"}
	bundle := map[string]bool{"foos.example.com-admin": true}
	var got []string
	for _, r := range DesiredRoles(ext, []string{"foos.example.com"}, oriav1alpha1.RBACModeLegacy, bundle) {
		got = append(got, r.Name)
	}
	want := []string{"foos.example.com-edit", "foos.example.com-view", "foos.example.com-view-crdview"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DesiredRoles with a bundle role (-want +got):\n%s", diff)
	}
}

// TestStaleRoles: oria deletes the roles it generated that are no longer
// desired, and never one whose name the bundle ships, even while the role
// cache still shows it as oria's alone (the bundle-role cache saw Helm's
// adoption first). Nor another extension's, a role being deleted, or one
// the bundle already owns.
func TestStaleRoles(t *testing.T) {
	ext := Extension{Name: "argocd", UID: "uid-1"}
	crd := "foos.example.com"
	generated := func() []rbacv1.ClusterRole {
		var out []rbacv1.ClusterRole
		for _, r := range DesiredRoles(ext, []string{crd}, oriav1alpha1.RBACModeLegacy, nil) {
			out = append(out, *r)
		}
		return out
	}
	view, edit := names.ExtensionRole(crd, names.RoleView), names.ExtensionRole(crd, names.RoleEdit)
	withoutView := DesiredRoles(ext, []string{crd}, oriav1alpha1.RBACModeLegacy, map[string]bool{view: true})
	tests := []struct {
		name    string
		cached  func() []rbacv1.ClusterRole
		desired []*rbacv1.ClusterRole
		bundle  map[string]bool
		want    []string
	}{{
		name: "all desired", cached: generated,
		desired: DesiredRoles(ext, []string{crd}, oriav1alpha1.RBACModeLegacy, nil),
	}, {
		name: "the API is gone", cached: generated,
		want: []string{names.ExtensionRole(crd, names.RoleAdmin), edit, view, view + "-crdview"},
	}, {
		name: "the bundle ships view: the role cache has not seen the adoption yet", cached: generated,
		desired: withoutView, bundle: map[string]bool{view: true},
	}, {
		name: "the bundle ships view, and the role cache shows the adoption",
		cached: func() []rbacv1.ClusterRole {
			out := generated()
			for i := range out {
				if out[i].Name == view {
					for k, v := range olm.OwnerLabels(ext.Name) {
						out[i].Labels[k] = v
					}
				}
			}
			return out
		},
		desired: withoutView, bundle: map[string]bool{view: true},
	}, {
		name: "not desired, no longer shipped: stale again", cached: generated,
		desired: withoutView, want: []string{view},
	}, {
		name: "being deleted",
		cached: func() []rbacv1.ClusterRole {
			out := generated()
			now := metav1.Now()
			for i := range out {
				out[i].DeletionTimestamp = &now
			}
			return out
		},
	}, {
		name: "another extension's", cached: generated,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := ext.Name
			if tt.name == "another extension's" {
				name = "other"
			}
			var got []string
			for _, r := range StaleRoles(tt.cached(), name, tt.desired, tt.bundle) {
				got = append(got, r.Name)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("StaleRoles (-want +got):\n%s", diff)
			}
		})
	}
}
