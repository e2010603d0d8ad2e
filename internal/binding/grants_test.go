package binding

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

func TestInstanceGrants(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}
	for _, tc := range []struct {
		name  string
		spec  oriav1alpha1.ScopeInstanceSpec
		roles []string
		want  []Grant
	}{{
		name:  "no namespaces, no selector: cluster-wide",
		spec:  oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: "t"},
		roles: []string{"view", "edit"},
		want:  []Grant{{Role: "edit"}, {Role: "view"}},
	}, {
		name:  "listed namespaces: each role in each namespace",
		spec:  oriav1alpha1.ScopeInstanceSpec{Namespaces: []string{"b", "a"}},
		roles: []string{"view", "edit"},
		want:  []Grant{{"edit", "a"}, {"view", "a"}, {"edit", "b"}, {"view", "b"}},
	}, {
		name:  "a selector is cluster-wide: it reaches any namespace labelled later",
		spec:  oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: sel},
		roles: []string{"view"},
		want:  []Grant{{Role: "view"}},
	}, {
		name:  "namespaces and a selector: the selector's cluster-wide grant covers the list",
		spec:  oriav1alpha1.ScopeInstanceSpec{Namespaces: []string{"a"}, NamespaceSelector: sel},
		roles: []string{"view"},
		want:  []Grant{{Role: "view"}},
	}, {
		name:  "an empty selector is still a selector",
		spec:  oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: &metav1.LabelSelector{}},
		roles: []string{"view"},
		want:  []Grant{{Role: "view"}},
	}, {
		name:  "duplicates in the list and in the roles collapse",
		spec:  oriav1alpha1.ScopeInstanceSpec{Namespaces: []string{"a", "a"}},
		roles: []string{"view", "view"},
		want:  []Grant{{"view", "a"}},
	}, {
		name:  "no roles grant nothing",
		spec:  oriav1alpha1.ScopeInstanceSpec{Namespaces: []string{"a"}},
		roles: nil,
		want:  nil,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, InstanceGrants(tc.spec, tc.roles)); diff != "" {
				t.Errorf("InstanceGrants (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGrantWhere(t *testing.T) {
	if got := (Grant{Role: "view"}).String(); got != `ClusterRole "view" cluster-wide` {
		t.Errorf("cluster-wide: %s", got)
	}
	if got := (Grant{Role: "view", Namespace: "a"}).String(); got != `ClusterRole "view" in namespace "a"` {
		t.Errorf("namespaced: %s", got)
	}
}
