package subjects

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
)

func TestIdentityOf(t *testing.T) {
	for _, tc := range []struct {
		s       rbacv1.Subject
		want    Identity
		wantErr bool
	}{
		{s: rbacv1.Subject{Kind: rbacv1.UserKind, Name: "alice"}, want: Identity{User: "alice"}},
		{s: rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "devs"}, want: Identity{Groups: []string{"devs"}}},
		{s: rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "bot", Namespace: "ci"}, want: Identity{User: "system:serviceaccount:ci:bot",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ci", Authenticated}}},
		{s: rbacv1.Subject{Kind: "Robot", Name: "x"}, wantErr: true},
	} {
		got, err := IdentityOf(tc.s)
		if (err != nil) != tc.wantErr {
			t.Errorf("IdentityOf(%v) error %v, want error %v", tc.s, err, tc.wantErr)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("IdentityOf(%v) (-want +got):\n%s", tc.s, diff)
		}
	}
}

func TestUserIdentity(t *testing.T) {
	for _, tc := range []struct {
		user   string
		groups []string
		want   Identity
	}{
		{user: "alice", want: Identity{User: "alice", Groups: []string{Authenticated}}},
		{user: "alice", groups: []string{"devs", "devs"}, want: Identity{User: "alice", Groups: []string{"devs", Authenticated}}},
		{groups: []string{"devs"}, want: Identity{Groups: []string{"devs"}}},
		{user: "system:serviceaccount:ci:robot", want: Identity{User: "system:serviceaccount:ci:robot",
			Groups: []string{Authenticated, "system:serviceaccounts", "system:serviceaccounts:ci"}}},
	} {
		if diff := cmp.Diff(tc.want, UserIdentity(tc.user, tc.groups)); diff != "" {
			t.Errorf("UserIdentity(%q, %v) (-want +got):\n%s", tc.user, tc.groups, diff)
		}
	}
}

func TestNames(t *testing.T) {
	sa := ServiceAccount("ci", "bot")
	for _, tc := range []struct {
		id   Identity
		s    rbacv1.Subject
		want bool
	}{
		{Identity{User: "alice"}, rbacv1.Subject{Kind: rbacv1.UserKind, Name: "alice"}, true},
		{Identity{User: "alice"}, rbacv1.Subject{Kind: rbacv1.UserKind, Name: "bob"}, false},
		{Identity{Groups: []string{"devs"}}, rbacv1.Subject{Kind: rbacv1.UserKind, Name: ""}, false},
		{Identity{Groups: []string{"devs"}}, rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "devs"}, true},
		{sa, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "bot", Namespace: "ci"}, true},
		{sa, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "bot", Namespace: "other"}, false},
		{Identity{User: "system:serviceaccount::bot"}, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "bot"}, false},
		{sa, rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "system:serviceaccounts:ci"}, true},
	} {
		if got := tc.id.Names(tc.s); got != tc.want {
			t.Errorf("%v.Names(%v) = %v, want %v", tc.id, tc.s, got, tc.want)
		}
	}
}
