package authz

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

func TestExpand(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rules     []rbacv1.PolicyRule
		namespace string
		want      []Permission
	}{{
		name:  "group × resource × verb, sorted",
		rules: []rbacv1.PolicyRule{{APIGroups: []string{"", "apps"}, Resources: []string{"pods", "deployments"}, Verbs: []string{"list", "get"}}},
		want: []Permission{
			{Verb: "get", Resource: "deployments"}, {Verb: "list", Resource: "deployments"},
			{Verb: "get", Resource: "pods"}, {Verb: "list", Resource: "pods"},
			{Verb: "get", Group: "apps", Resource: "deployments"}, {Verb: "list", Group: "apps", Resource: "deployments"},
			{Verb: "get", Group: "apps", Resource: "pods"}, {Verb: "list", Group: "apps", Resource: "pods"},
		},
	}, {
		name:      "namespace, resource names and subresources",
		rules:     []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps", "pods/log"}, Verbs: []string{"get"}, ResourceNames: []string{"b", "a"}}},
		namespace: "team-a",
		want: []Permission{
			{Verb: "get", Resource: "configmaps", Name: "a", Namespace: "team-a"},
			{Verb: "get", Resource: "configmaps", Name: "b", Namespace: "team-a"},
			{Verb: "get", Resource: "pods", Subresource: "log", Name: "a", Namespace: "team-a"},
			{Verb: "get", Resource: "pods", Subresource: "log", Name: "b", Namespace: "team-a"},
		},
	}, {
		name:  "wildcards stay literal",
		rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}},
		want:  []Permission{{Verb: "*", Group: "*", Resource: "*"}},
	}, {
		name: "non-resource URLs cluster-wide",
		rules: []rbacv1.PolicyRule{
			{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		},
		want: []Permission{{Verb: "get", Resource: "pods"}, {Verb: "get", NonResourceURL: "/metrics"}},
	}, {
		name: "a RoleBinding grants no non-resource URL",
		rules: []rbacv1.PolicyRule{
			{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		},
		namespace: "team-a",
		want:      []Permission{{Verb: "get", Resource: "pods", Namespace: "team-a"}},
	}, {
		name: "duplicates collapse",
		rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "get"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		},
		want: []Permission{{Verb: "get", Resource: "pods"}},
	}, {
		name: "no rules",
		want: nil,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Expand(tc.rules, tc.namespace)); diff != "" {
				t.Errorf("Expand (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPermissionString(t *testing.T) {
	for want, p := range map[string]Permission{
		"get secrets": {Verb: "get", Resource: "secrets"},
		"create clusterrolebindings.rbac.authorization.k8s.io": {Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"},
		`get configmaps "cfg"`:                                 {Verb: "get", Resource: "configmaps", Name: "cfg", Namespace: "a"},
		"get pods/log":                                         {Verb: "get", Resource: "pods", Subresource: "log"},
		"* *.*":                                                {Verb: "*", Group: "*", Resource: "*"},
		"get non-resource URL /metrics":                        {Verb: "get", NonResourceURL: "/metrics"},
	} {
		if got := p.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", p, got, want)
		}
	}
}

func TestSubjectAccessReview(t *testing.T) {
	user := authenticationv1.UserInfo{Username: "bob", UID: "u1", Groups: []string{"devs", "system:authenticated"},
		Extra: map[string]authenticationv1.ExtraValue{"scopes": {"a"}}}
	got := SubjectAccessReview(user, Permission{Verb: "bind", Group: rbacv1.GroupName, Resource: "clusterroles", Name: "view", Namespace: "team-a"})
	want := authorizationv1.SubjectAccessReviewSpec{
		User: "bob", UID: "u1", Groups: []string{"devs", "system:authenticated"},
		Extra:              map[string]authorizationv1.ExtraValue{"scopes": {"a"}},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "team-a", Verb: "bind", Group: rbacv1.GroupName, Resource: "clusterroles", Name: "view"},
	}
	if diff := cmp.Diff(want, got.Spec); diff != "" {
		t.Errorf("resource review (-want +got):\n%s", diff)
	}
	got = SubjectAccessReview(authenticationv1.UserInfo{Username: "bob"}, Permission{Verb: "get", NonResourceURL: "/metrics"})
	want = authorizationv1.SubjectAccessReviewSpec{User: "bob", NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}}
	if diff := cmp.Diff(want, got.Spec); diff != "" {
		t.Errorf("non-resource review (-want +got):\n%s", diff)
	}
}
