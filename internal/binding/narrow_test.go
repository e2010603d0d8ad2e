package binding

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNarrow(t *testing.T) {
	alice := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}
	mallory := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "mallory"}
	rb := func(ns, role string, subj ...rbacv1.Subject) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role + "-" + ns},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}, Subjects: subj}
	}
	crb := func(role string) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}, Subjects: []rbacv1.Subject{alice}}
	}
	existing := []*rbacv1.RoleBinding{rb("keep", "view", alice), rb("victim", "view", alice), rb("going", "view", alice),
		rb("keep", "edit", alice), rb("keep", "view2", mallory), rb("keep", "sa", rbacv1.Subject{Kind: "ServiceAccount", Name: "op", Namespace: "keep"})}
	namespaced := &Targets{Namespaces: []string{"keep"}, Terminating: []string{"going"}}
	names := func(bs []*rbacv1.RoleBinding) []string {
		var out []string
		for _, b := range bs {
			out = append(out, b.Name)
		}
		return out
	}
	tests := []struct {
		name  string
		allow Allowance
		want  []string
	}{
		{name: "unknown targets revoke everything", allow: Allowance{},
			want: []string{"view-keep", "view-victim", "view-going", "edit-keep", "view2-keep", "sa-keep"}},
		{name: "template gone: only the places narrow", allow: Allowance{Targets: namespaced},
			want: []string{"view-victim"}},
		{name: "cluster-wide allows every namespace", allow: Allowance{Targets: &Targets{Cluster: true}}},
		{name: "a role or subject the template no longer names goes", allow: Allowance{Targets: namespaced, KnownTemplate: true,
			Roles: []string{"view", "view2", "sa"}, Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "alice"}, {Kind: "ServiceAccount", Name: "op"}}},
			want: []string{"view-victim", "edit-keep", "view2-keep"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Narrow(existing, tc.allow, RoleOfRoleBinding, SubjectsOfRoleBinding)
			if diff := cmp.Diff(tc.want, names(got), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("stale (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("a ClusterRoleBinding goes once the spec binds in namespaces", func(t *testing.T) {
		got := Narrow([]*rbacv1.ClusterRoleBinding{crb("view")}, Allowance{Targets: namespaced}, RoleOfClusterRoleBinding, SubjectsOfClusterRoleBinding)
		if len(got) != 1 {
			t.Errorf("got %d stale ClusterRoleBindings, want 1", len(got))
		}
	})
}
