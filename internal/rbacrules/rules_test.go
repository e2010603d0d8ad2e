package rbacrules

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/operator-framework/oria/internal/subjects"
)

// objects is a Lister over slices.
type objects struct {
	crbs  []*rbacv1.ClusterRoleBinding
	rbs   []*rbacv1.RoleBinding
	crs   []*rbacv1.ClusterRole
	roles []*rbacv1.Role
	err   error
}

func (o objects) ClusterRoleBindings() ([]*rbacv1.ClusterRoleBinding, error) { return o.crbs, o.err }
func (o objects) RoleBindings(ns string) ([]*rbacv1.RoleBinding, error) {
	var out []*rbacv1.RoleBinding
	for _, b := range o.rbs {
		if b.Namespace == ns {
			out = append(out, b)
		}
	}
	return out, nil
}
func (o objects) ClusterRole(name string) (*rbacv1.ClusterRole, error) {
	for _, r := range o.crs {
		if r.Name == name {
			return r, nil
		}
	}
	return nil, nil
}
func (o objects) Role(ns, name string) (*rbacv1.Role, error) {
	for _, r := range o.roles {
		if r.Namespace == ns && r.Name == name {
			return r, nil
		}
	}
	return nil, nil
}

// rulesFor returns the rules user holds in namespace, as one check reads
// them.
func rulesFor(l Lister, user subjects.Identity, namespace string) ([]rbacv1.PolicyRule, error) {
	h, err := Holdings(l, user, []string{namespace})
	if err != nil {
		return nil, err
	}
	return h[namespace].Rules(l)
}

func rule(resource string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{resource}}
}

func TestFor(t *testing.T) {
	meta := func(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }
	ref := func(kind, name string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name}
	}
	user := func(n string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: n}
	}
	group := func(n string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: n}
	}
	sa := func(ns, n string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: n}
	}
	l := objects{
		crs: []*rbacv1.ClusterRole{
			{ObjectMeta: meta("", "pods"), Rules: []rbacv1.PolicyRule{rule("pods")}},
			{ObjectMeta: meta("", "secrets"), Rules: []rbacv1.PolicyRule{rule("secrets")}},
			{ObjectMeta: meta("", "nodes"), Rules: []rbacv1.PolicyRule{rule("nodes")}},
		},
		roles: []*rbacv1.Role{{ObjectMeta: meta("a", "cms"), Rules: []rbacv1.PolicyRule{rule("configmaps")}}},
		crbs: []*rbacv1.ClusterRoleBinding{
			{ObjectMeta: meta("", "alice-nodes"), RoleRef: ref("ClusterRole", "nodes"), Subjects: []rbacv1.Subject{user("alice")}},
			{ObjectMeta: meta("", "devs-pods"), RoleRef: ref("ClusterRole", "pods"), Subjects: []rbacv1.Subject{group("devs")}},
			// A ServiceAccount without a namespace in a ClusterRoleBinding
			// is nobody.
			{ObjectMeta: meta("", "sa-nowhere"), RoleRef: ref("ClusterRole", "secrets"), Subjects: []rbacv1.Subject{sa("", "bot")}},
			{ObjectMeta: meta("", "gone"), RoleRef: ref("ClusterRole", "absent"), Subjects: []rbacv1.Subject{user("alice")}},
		},
		rbs: []*rbacv1.RoleBinding{
			{ObjectMeta: meta("a", "alice-secrets"), RoleRef: ref("ClusterRole", "secrets"), Subjects: []rbacv1.Subject{user("bob"), user("alice")}},
			{ObjectMeta: meta("a", "alice-cms"), RoleRef: ref("Role", "cms"), Subjects: []rbacv1.Subject{user("alice")}},
			{ObjectMeta: meta("b", "alice-cms"), RoleRef: ref("Role", "cms"), Subjects: []rbacv1.Subject{user("alice")}},
			{ObjectMeta: meta("a", "bot"), RoleRef: ref("ClusterRole", "pods"), Subjects: []rbacv1.Subject{sa("", "bot")}},
			{ObjectMeta: meta("b", "bot-of-a"), RoleRef: ref("ClusterRole", "secrets"), Subjects: []rbacv1.Subject{sa("a", "bot")}},
		},
	}
	alice := subjects.Identity{User: "alice", Groups: []string{"devs", "system:authenticated"}}
	bot := subjects.Identity{User: "system:serviceaccount:a:bot", Groups: []string{"system:serviceaccounts"}}
	for _, tc := range []struct {
		name string
		user subjects.Identity
		ns   string
		want []rbacv1.PolicyRule
	}{
		{"cluster-wide: her ClusterRoleBindings, by name and by group; an absent role grants nothing", alice, "", []rbacv1.PolicyRule{rule("nodes"), rule("pods")}},
		{"in a: also her RoleBindings there, to a ClusterRole and to a Role of a", alice, "a",
			[]rbacv1.PolicyRule{rule("nodes"), rule("pods"), rule("secrets"), rule("configmaps")}},
		{"in b: a Role is read in the binding's namespace (b has no cms)", alice, "b", []rbacv1.PolicyRule{rule("nodes"), rule("pods")}},
		{"in c: nothing of a's", alice, "c", []rbacv1.PolicyRule{rule("nodes"), rule("pods")}},
		{"a ServiceAccount without a namespace is the binding namespace's", bot, "a", []rbacv1.PolicyRule{rule("pods")}},
		{"a ServiceAccount named with its namespace, bound elsewhere", bot, "b", []rbacv1.PolicyRule{rule("secrets")}},
		{"nobody else", subjects.Identity{User: "mallory", Groups: []string{"system:authenticated"}}, "a", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rulesFor(l, tc.user, tc.ns)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("For (-want +got):\n%s", diff)
			}
		})
	}
	l.err = errors.New("boom")
	if _, err := rulesFor(l, alice, "a"); err == nil {
		t.Error("a failed list is an error, not an empty rule set")
	}
}

func TestLeanKeepsWhatRBACReads(t *testing.T) {
	in := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "a", UID: "u", ResourceVersion: "7",
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"}, Labels: map[string]string{"a": "b"}},
		RoleRef:  rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "alice"}},
	}
	out, err := leanObject(in)
	if err != nil {
		t.Fatal(err)
	}
	want := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "a", UID: "u", ResourceVersion: "7"}, RoleRef: in.RoleRef, Subjects: in.Subjects}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("leanObject (-want +got):\n%s", diff)
	}
}

func TestWaitForSync(t *testing.T) {
	c := &Cache{synced: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := c.WaitForSync(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("before the sync, WaitForSync = %v, want the context's error", err)
	}
	if c.Synced() {
		t.Error("Synced before the informers listed")
	}
	close(c.synced)
	if err := c.WaitForSync(context.Background()); err != nil || !c.Synced() {
		t.Errorf("after the sync: WaitForSync = %v, Synced = %v", err, c.Synced())
	}
}
