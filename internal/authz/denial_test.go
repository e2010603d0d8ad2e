package authz

import (
	"testing"

	"github.com/operator-framework/oria/internal/binding"
)

func TestDenialMessage(t *testing.T) {
	for _, tc := range []struct {
		d    Denial
		want string
	}{{
		d: Denial{Verb: "bind", Grant: binding.Grant{Role: "cluster-admin", Namespace: "team-b"},
			Missing: []Permission{{Verb: "get", Resource: "secrets", Namespace: "team-b"}}, More: true},
		want: `user "bob" may not bind ClusterRole "cluster-admin" in namespace "team-b": needs "bind" on clusterroles/cluster-admin there, or every permission it grants (missing: get secrets, ...)`,
	}, {
		d:    Denial{Verb: "bind", Grant: binding.Grant{Role: "view"}, Missing: []Permission{{Verb: "list", Resource: "pods"}}},
		want: `user "bob" may not bind ClusterRole "view" cluster-wide: needs "bind" on clusterroles/view cluster-wide, or every permission it grants (missing: list pods)`,
	}, {
		d:    Denial{Verb: "bind", Grant: binding.Grant{Role: "later", Namespace: "a"}, Absent: true},
		want: `user "bob" may not bind ClusterRole "later" in namespace "a": needs "bind" on clusterroles/later there (the ClusterRole does not exist yet, so only "bind" allows binding it)`,
	}, {
		d:    Denial{Verb: "bind", Grant: binding.Grant{Role: "theirs", Namespace: "a"}, InlineOf: "admins"},
		want: `user "bob" may not bind ClusterRole "theirs" in namespace "a": needs "bind" on clusterroles/theirs there (it is ScopeTemplate "admins"'s inline role, which oria rewrites whenever that template changes, so only "bind" allows binding it elsewhere: inline the rules instead)`,
	}, {
		d:    Denial{Verb: "escalate", Grant: binding.Grant{Role: "mine"}, Missing: []Permission{{Verb: "*", Group: "*", Resource: "*"}}},
		want: `user "bob" may not create ClusterRole "mine" with these rules: needs "escalate" on clusterroles/mine, or every permission it grants cluster-wide (missing: * *.*)`,
	}, {
		d:    Denial{Verb: "bind", Grant: binding.Grant{Role: "huge"}, TooLarge: true},
		want: `user "bob" may not bind ClusterRole "huge" cluster-wide: needs "bind" on clusterroles/huge cluster-wide, or every permission it grants (it grants too many permissions to check one by one)`,
	}} {
		if got := tc.d.Message("bob"); got != tc.want {
			t.Errorf("Message:\n got %s\nwant %s", got, tc.want)
		}
	}
}
