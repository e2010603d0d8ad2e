package binding

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

var (
	podsRule    = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}
	secretsRule = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}}
)

func TestCeilingHash(t *testing.T) {
	pods := CeilingHash([]rbacv1.PolicyRule{podsRule})
	for _, tc := range []struct {
		name  string
		rules []rbacv1.PolicyRule
		same  bool
	}{
		{"the same rules, another copy: the same value", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}, true},
		{"a widened rule set differs", []rbacv1.PolicyRule{podsRule, secretsRule}, false},
		{"another verb differs", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}}, false},
		{"a resource name differs", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}, ResourceNames: []string{"a"}}}, false},
		{"no rules differ", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CeilingHash(tc.rules) == pods; got != tc.same {
				t.Errorf("CeilingHash(%v) == CeilingHash(pods) is %v, want %v", tc.rules, got, tc.same)
			}
		})
	}
	if d := cmp.Diff(CeilingHash(nil), CeilingHash([]rbacv1.PolicyRule{})); d != "" {
		t.Errorf("nil and empty rules hash differently (-nil +empty):\n%s", d)
	}
	if got := len(pods); got != len("sha256:")+64 {
		t.Errorf("len(CeilingHash) = %d, want a full SHA-256 (71)", got)
	}
	if pods == CeilingAbsent {
		t.Error("a hash equals CeilingAbsent")
	}
}

func TestCeilingAnnotations(t *testing.T) {
	if got := CeilingAnnotations(nil); got != nil {
		t.Errorf("CeilingAnnotations(nil) = %v, want nil (no serviceAccount: no annotation)", got)
	}
	got := CeilingAnnotations(map[string]string{"a": "h1", "b": CeilingAbsent})
	want := map[string]map[string]string{
		"a": {oriav1alpha1.AnnotationCeilingRules: "h1"},
		"b": {oriav1alpha1.AnnotationCeilingRules: CeilingAbsent},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("CeilingAnnotations (-want +got):\n%s", d)
	}
}

func TestBeyondCeiling(t *testing.T) {
	rb := func(ns, role, ceiling string) *rbacv1.RoleBinding {
		b := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role + "-b"},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}}
		if ceiling != "" {
			b.Annotations = map[string]string{oriav1alpha1.AnnotationCeilingRules: ceiling}
		}
		return b
	}
	ceilings := map[string]string{"inline": "new", "ref": "h"}
	for _, tc := range []struct {
		name     string
		existing []*rbacv1.RoleBinding
		covered  map[types.NamespacedName]bool
		want     []string
	}{{
		name:     "records the role's ceiling: kept",
		existing: []*rbacv1.RoleBinding{rb("a", "inline", "new"), rb("a", "ref", "h")},
	}, {
		name:     "records old rules: goes",
		existing: []*rbacv1.RoleBinding{rb("a", "inline", "old"), rb("b", "inline", "new")},
		want:     []string{"a/inline-b"},
	}, {
		name:     "records nothing (written before ceilings were recorded): goes",
		existing: []*rbacv1.RoleBinding{rb("a", "ref", "")},
		want:     []string{"a/ref-b"},
	}, {
		name:     "written or deleted anyway: left to that",
		existing: []*rbacv1.RoleBinding{rb("a", "inline", "old"), rb("b", "inline", "old")},
		covered:  map[types.NamespacedName]bool{{Namespace: "a", Name: "inline-b"}: true},
		want:     []string{"b/inline-b"},
	}, {
		name:     "a role the template no longer has, recording nothing: kept (stale or terminating, not a ceiling matter)",
		existing: []*rbacv1.RoleBinding{rb("a", "gone", "")},
	}, {
		name:     "a role the template no longer has, recording a ceiling: goes",
		existing: []*rbacv1.RoleBinding{rb("a", "gone", "h")},
		want:     []string{"a/gone-b"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, b := range BeyondCeiling(tc.existing, tc.covered, ceilings, RoleOfRoleBinding) {
				got = append(got, b.Namespace+"/"+b.Name)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("BeyondCeiling (-want +got):\n%s", d)
			}
		})
	}
}

func TestRoleOf(t *testing.T) {
	got := []string{
		RoleOfRoleBinding(&rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "c"}}),
		RoleOfRoleBinding(&rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "r"}}),
		RoleOfClusterRoleBinding(&rbacv1.ClusterRoleBinding{RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "c"}}),
	}
	if d := cmp.Diff([]string{"c", "", "c"}, got); d != "" {
		t.Errorf("RoleOf (-want +got):\n%s", d)
	}
}
