package scopetemplate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/operator-framework/oria/internal/binding"
)

var (
	pods    = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}
	secrets = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods", "secrets"}, Verbs: []string{"get", "list"}}}
)

func role(name string, rules []rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
}

func TestChanging(t *testing.T) {
	for _, tc := range []struct {
		name    string
		desired []*rbacv1.ClusterRole
		cached  []*rbacv1.ClusterRole
		want    map[string]string
	}{{
		name:    "unchanged rules: nothing to hold",
		desired: []*rbacv1.ClusterRole{role("a", pods)},
		cached:  []*rbacv1.ClusterRole{role("a", pods)},
		want:    map[string]string{},
	}, {
		name:    "widened rules: the new rules' ceiling",
		desired: []*rbacv1.ClusterRole{role("a", secrets), role("b", pods)},
		cached:  []*rbacv1.ClusterRole{role("a", pods), role("b", pods)},
		want:    map[string]string{"a": binding.CeilingHash(secrets)},
	}, {
		name:    "narrowed rules count too (any change of what it grants)",
		desired: []*rbacv1.ClusterRole{role("a", pods)},
		cached:  []*rbacv1.ClusterRole{role("a", secrets)},
		want:    map[string]string{"a": binding.CeilingHash(pods)},
	}, {
		name:    "not created yet: bindings kept from before would grant it",
		desired: []*rbacv1.ClusterRole{role("a", pods)},
		want:    map[string]string{"a": binding.CeilingHash(pods)},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cached := map[types.NamespacedName]*rbacv1.ClusterRole{}
			for _, cr := range tc.cached {
				cached[types.NamespacedName{Name: cr.Name}] = cr
			}
			if d := cmp.Diff(tc.want, changing(tc.desired, cached)); d != "" {
				t.Errorf("changing (-want +got):\n%s", d)
			}
		})
	}
}

func TestUnconfirmed(t *testing.T) {
	roles := map[string]string{"a": "new-a", "b": "new-b"}
	for _, tc := range []struct {
		name     string
		bindings map[string][]ceilingBinding
		want     map[string][]string
	}{{
		name:     "every binding records the new rules: nothing held",
		bindings: map[string][]ceilingBinding{"i1": {{"a", "new-a"}, {"a", "new-a"}, {"b", "new-b"}}},
		want:     map[string][]string{},
	}, {
		name: "one binding of one instance still records the old rules",
		bindings: map[string][]ceilingBinding{
			"i2": {{"a", "new-a"}, {"a", "old-a"}, {"a", "old-a"}},
			"i1": {{"a", "old-a"}, {"b", "new-b"}},
		},
		want: map[string][]string{"a": {"i1", "i2"}},
	}, {
		name:     "a binding recording nothing (written before ceilings were recorded) is not confirmed",
		bindings: map[string][]ceilingBinding{"i1": {{"b", ""}}},
		want:     map[string][]string{"b": {"i1"}},
	}, {
		name:     "bindings of roles that do not change do not matter",
		bindings: map[string][]ceilingBinding{"i1": {{"view", "old"}, {"", "old"}}},
		want:     map[string][]string{},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, unconfirmed(roles, tc.bindings)); d != "" {
				t.Errorf("unconfirmed (-want +got):\n%s", d)
			}
		})
	}
}
