package subjects

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
)

func TestNormalize(t *testing.T) {
	in := []rbacv1.Subject{
		{Kind: rbacv1.UserKind, Name: "alice"},
		{Kind: rbacv1.GroupKind, Name: "devs", APIGroup: rbacv1.GroupName},
		{Kind: rbacv1.ServiceAccountKind, Name: "bot"},
		{Kind: rbacv1.ServiceAccountKind, Name: "ci", Namespace: "ops"},
	}
	want := []rbacv1.Subject{
		{Kind: rbacv1.UserKind, Name: "alice", APIGroup: rbacv1.GroupName},
		{Kind: rbacv1.GroupKind, Name: "devs", APIGroup: rbacv1.GroupName},
		{Kind: rbacv1.ServiceAccountKind, Name: "bot", Namespace: "team-a"},
		{Kind: rbacv1.ServiceAccountKind, Name: "ci", Namespace: "ops"},
	}
	if diff := cmp.Diff(want, Normalize(in, "team-a")); diff != "" {
		t.Errorf("Normalize (-want +got):\n%s", diff)
	}
	if in[0].APIGroup != "" {
		t.Error("Normalize changed its input")
	}
	if Normalize(nil, "x") != nil {
		t.Error("nil stays nil")
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		subject rbacv1.Subject
		want    string // substring; "" means valid
	}{
		{rbacv1.Subject{Kind: rbacv1.UserKind, Name: "alice"}, ""},
		{rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "bot"}, ""},
		{rbacv1.Subject{Kind: rbacv1.UserKind}, "spec.subjects[0]: name is required"},
		{rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "Bad_SA!", Namespace: "ci"}, `ServiceAccount name "Bad_SA!" is not valid`},
		{rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "bot", Namespace: "Not.A.Label"}, `namespace "Not.A.Label" is not valid`},
		{rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "bot", APIGroup: "x"}, "a ServiceAccount has no apiGroup"},
		{rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "g", APIGroup: "example.com"}, `apiGroup of a Group must be "rbac.authorization.k8s.io"`},
		{rbacv1.Subject{Kind: "user", Name: "alice"}, `kind "user" is not one of User, Group, ServiceAccount`},
	} {
		got := strings.Join(Validate([]rbacv1.Subject{tc.subject}, "spec.subjects"), "; ")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("Validate(%+v) = %q, want %q", tc.subject, got, tc.want)
		}
	}
}

func TestRequireNamespaces(t *testing.T) {
	got := RequireNamespaces([]rbacv1.Subject{
		{Kind: rbacv1.ServiceAccountKind, Name: "ok", Namespace: "ns"},
		{Kind: rbacv1.UserKind, Name: "alice"},
		{Kind: rbacv1.ServiceAccountKind, Name: "bot"},
	}, "subjects", "needs a namespace")
	if diff := cmp.Diff([]string{`subjects[2]: ServiceAccount "bot" needs a namespace`}, got); diff != "" {
		t.Errorf("RequireNamespaces (-want +got):\n%s", diff)
	}
}
