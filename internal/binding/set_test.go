package binding

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestSet: a Set's length, keys and roles, and a union that keeps each key
// once, RoleBindings and ClusterRoleBindings apart.
func TestSet(t *testing.T) {
	rb := func(ns, name, role string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: role}}
	}
	crb := func(name, role string) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: role}}
	}
	a := Set{RoleBindings: []*rbacv1.RoleBinding{rb("a", "x", "view")}, ClusterRoleBindings: []*rbacv1.ClusterRoleBinding{crb("x", "edit")}}
	b := Set{RoleBindings: []*rbacv1.RoleBinding{rb("a", "x", "view"), rb("b", "x", "view")}, ClusterRoleBindings: []*rbacv1.ClusterRoleBinding{crb("y", "edit")}}
	u := a.Union(b)
	if u.Len() != 4 {
		t.Errorf("union of %d, want 4", u.Len())
	}
	want := map[types.NamespacedName]bool{{Namespace: "a", Name: "x"}: true, {Namespace: "b", Name: "x"}: true, {Name: "x"}: true, {Name: "y"}: true}
	if d := cmp.Diff(want, u.Keys()); d != "" {
		t.Errorf("keys (-want +got):\n%s", d)
	}
	var roles []string
	for _, o := range u.Objects() {
		roles = append(roles, RoleOf(o))
	}
	if d := cmp.Diff([]string{"view", "view", "edit", "edit"}, roles); d != "" {
		t.Errorf("roles, RoleBindings first (-want +got):\n%s", d)
	}
	if RoleOf(&rbacv1.ClusterRole{}) != "" {
		t.Error("a ClusterRole binds no role")
	}
}
