package binding

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
)

var podRules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}

func template(name string, roles []oriav1alpha1.ClusterRoleTemplate, subjects ...rbacv1.Subject) *oriav1alpha1.ScopeTemplate {
	return &oriav1alpha1.ScopeTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: "tuid"},
		Spec: oriav1alpha1.ScopeTemplateSpec{
			ClusterRoles:    roles,
			BindingTemplate: oriav1alpha1.BindingTemplate{Subjects: subjects},
		},
	}
}

func instance(name string) *oriav1alpha1.ScopeInstance {
	return &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "iuid"}}
}

func sa(name, ns string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}
}

func TestRoleName(t *testing.T) {
	// The seed's example: a generateName prefix gets a stable suffix.
	got := RoleName("foo", oriav1alpha1.ClusterRoleTemplate{GenerateName: "fooClusterRole-", Rules: podRules})
	assert.Equal(t, "fooClusterRole-"+names.Hash("foo", "fooClusterRole-"), got)
	assert.Equal(t, got, RoleName("foo", oriav1alpha1.ClusterRoleTemplate{GenerateName: "fooClusterRole-", Rules: podRules}), "deterministic")
	assert.NotEqual(t, got, RoleName("bar", oriav1alpha1.ClusterRoleTemplate{GenerateName: "fooClusterRole-", Rules: podRules}),
		"the same prefix in two templates gives two roles")
	// A name is used as given, inline or referenced.
	assert.Equal(t, "view", RoleName("foo", oriav1alpha1.ClusterRoleTemplate{Name: "view"}))
	assert.Equal(t, "mine", RoleName("foo", oriav1alpha1.ClusterRoleTemplate{Name: "mine", Rules: podRules}))
	// The longest prefix still fits.
	long := RoleName(strings.Repeat("t", 253), oriav1alpha1.ClusterRoleTemplate{GenerateName: strings.Repeat("p", 200), Rules: podRules})
	assert.LessOrEqual(t, len(long), 253)
	assert.True(t, strings.HasPrefix(long, strings.Repeat("p", 200)))
}

func TestRoles(t *testing.T) {
	tmpl := template("foo", []oriav1alpha1.ClusterRoleTemplate{
		{GenerateName: "gen-", Rules: podRules},
		{Name: "view"},
		{Name: "inline", Rules: podRules},
	})
	want := []Role{
		{Name: "gen-" + names.Hash("foo", "gen-"), Inline: true, Rules: podRules},
		{Name: "view"},
		{Name: "inline", Inline: true, Rules: podRules},
	}
	require.Equal(t, want, Roles(tmpl))
	assert.Equal(t, []string{want[0].Name, "view", "inline"}, RoleNames(Roles(tmpl)))
}

func TestBindingName(t *testing.T) {
	n := BindingName("inst", "view")
	assert.Equal(t, "inst-view-"+names.Hash("inst", "view"), n)
	// A plain join would collide here; the hash keeps them apart.
	assert.NotEqual(t, BindingName("a-b", "c"), BindingName("a", "b-c"))
	// Long names are shortened to a valid, readable, unique name.
	longInst, longRole := strings.Repeat("i", 253), strings.Repeat("r", 253)
	l1, l2 := BindingName(longInst, longRole), BindingName(longInst, longRole+"x")
	assert.Len(t, l1, 253)
	assert.NotEqual(t, l1, l2)
	assert.True(t, strings.HasPrefix(l1, strings.Repeat("i", 200)))
	assert.Empty(t, validation.IsDNS1123Subdomain(strings.ToLower(l1)))
}

func TestValidateTemplate(t *testing.T) {
	ok := []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "alice"}, sa("bot", ""), {Kind: rbacv1.GroupKind, Name: "devs", APIGroup: rbacv1.GroupName}}
	tests := []struct {
		name       string
		tmpl       *oriav1alpha1.ScopeTemplate
		wantReason string
		wantMsg    string
	}{{
		name: "valid",
		tmpl: template("foo", []oriav1alpha1.ClusterRoleTemplate{{GenerateName: "x-", Rules: podRules}, {Name: "view"}}, ok...),
	}, {
		name:       "duplicate role names",
		tmpl:       template("foo", []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}, {Name: "view"}}, ok...),
		wantReason: oriav1alpha1.ReasonInvalidSpec, wantMsg: `spec.clusterRoles[1]: ClusterRole "view" is also spec.clusterRoles[0]`,
	}, {
		name:       "role name with a slash",
		tmpl:       template("foo", []oriav1alpha1.ClusterRoleTemplate{{Name: "a/b"}}, ok...),
		wantReason: oriav1alpha1.ReasonInvalidSpec, wantMsg: `ClusterRole name "a/b"`,
	}, {
		name:       "rule without verbs",
		tmpl:       template("foo", []oriav1alpha1.ClusterRoleTemplate{{Name: "r", Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}}}}}, ok...),
		wantReason: oriav1alpha1.ReasonInvalidSpec, wantMsg: "spec.clusterRoles[0].rules[0]: verbs must contain at least one value",
	}, {
		name:       "rule mixing resources and URLs",
		tmpl:       template("foo", []oriav1alpha1.ClusterRoleTemplate{{Name: "r", Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, Resources: []string{"pods"}, NonResourceURLs: []string{"/healthz"}}}}}, ok...),
		wantReason: oriav1alpha1.ReasonInvalidSpec, wantMsg: "both resources and non-resource URLs",
	}, {
		name:       "generateName without rules",
		tmpl:       template("foo", []oriav1alpha1.ClusterRoleTemplate{{GenerateName: "x-"}}, ok...),
		wantReason: oriav1alpha1.ReasonInvalidSpec, wantMsg: "generateName needs rules",
	}, {
		name:       "unknown subject kind",
		tmpl:       template("foo", []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, rbacv1.Subject{Kind: "Robot", Name: "r2"}),
		wantReason: oriav1alpha1.ReasonInvalidSubject, wantMsg: `kind "Robot" is not one of User, Group, ServiceAccount`,
	}, {
		name:       "empty subject name",
		tmpl:       template("foo", []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, rbacv1.Subject{Kind: rbacv1.UserKind}),
		wantReason: oriav1alpha1.ReasonInvalidSubject, wantMsg: "subjects[0]: name is required",
	}, {
		// The seed's example names "fooServiceAccount", which no
		// ServiceAccount can be called.
		name:       "ServiceAccount name not a DNS subdomain",
		tmpl:       template("foo", []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, sa("fooServiceAccount", "")),
		wantReason: oriav1alpha1.ReasonInvalidSubject, wantMsg: `ServiceAccount name "fooServiceAccount" is not valid`,
	}, {
		name:       "User with a foreign API group",
		tmpl:       template("foo", []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, rbacv1.Subject{Kind: rbacv1.UserKind, Name: "a", APIGroup: "example.com"}),
		wantReason: oriav1alpha1.ReasonInvalidSubject, wantMsg: `apiGroup of a User must be "rbac.authorization.k8s.io"`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateTemplate(tt.tmpl)
			if tt.wantReason == "" {
				require.Nil(t, err)
				return
			}
			require.NotNil(t, err)
			assert.Equal(t, tt.wantReason, err.Reason)
			assert.Contains(t, err.Message, tt.wantMsg)
		})
	}
}

func TestClusterRoles(t *testing.T) {
	tmpl := template("foo", []oriav1alpha1.ClusterRoleTemplate{
		{Name: "zeta", Rules: podRules},
		{Name: "view"},
		{GenerateName: "alpha-", Rules: podRules},
	})
	got := ClusterRoles(tmpl)
	require.Len(t, got, 2, "only inline roles")
	assert.Equal(t, "alpha-"+names.Hash("foo", "alpha-"), got[0].Name, "sorted by name")
	assert.Equal(t, "zeta", got[1].Name)
	for _, cr := range got {
		assert.Equal(t, map[string]string{oriav1alpha1.LabelManaged: "true", oriav1alpha1.LabelManagedBy: "oria", oriav1alpha1.LabelScopeTemplate: "foo"}, cr.Labels)
		assert.Equal(t, []metav1.OwnerReference{{
			APIVersion: "oria.operatorframework.io/v1alpha1", Kind: "ScopeTemplate", Name: "foo", UID: "tuid",
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}}, cr.OwnerReferences)
		assert.Equal(t, podRules, cr.Rules)
	}
}

func TestResolveTargets(t *testing.T) {
	nss := []Namespace{
		{Name: "a", Labels: map[string]string{"team": "x"}},
		{Name: "b", Labels: map[string]string{"team": "y"}},
		{Name: "c", Labels: map[string]string{"team": "x", "env": "prod"}},
		{Name: "d"},
		{Name: "gone", Labels: map[string]string{"team": "x"}, Terminating: true},
	}
	tests := []struct {
		name string
		spec oriav1alpha1.ScopeInstanceSpec
		want Targets
	}{{
		name: "neither field is cluster-wide",
		spec: oriav1alpha1.ScopeInstanceSpec{},
		want: Targets{Cluster: true},
	}, {
		name: "listed namespaces, one missing",
		spec: oriav1alpha1.ScopeInstanceSpec{Namespaces: []string{"d", "b", "nope"}},
		want: Targets{Namespaces: []string{"b", "d"}, Missing: []string{"nope"}},
	}, {
		name: "selector",
		spec: oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}},
		want: Targets{Namespaces: []string{"a", "c"}, Terminating: []string{"gone"}},
	}, {
		name: "union of list and selector, no duplicates",
		spec: oriav1alpha1.ScopeInstanceSpec{Namespaces: []string{"a", "d"}, NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}},
		want: Targets{Namespaces: []string{"a", "c", "d"}, Terminating: []string{"gone"}},
	}, {
		name: "matchExpressions",
		spec: oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"x", "y"}},
			{Key: "env", Operator: metav1.LabelSelectorOpDoesNotExist},
		}}},
		want: Targets{Namespaces: []string{"a", "b"}, Terminating: []string{"gone"}},
	}, {
		name: "selector matching nothing binds nothing (never cluster-wide)",
		spec: oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "nobody"}}},
		want: Targets{},
	}, {
		name: "empty selector matches every namespace",
		spec: oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: &metav1.LabelSelector{}},
		want: Targets{Namespaces: []string{"a", "b", "c", "d"}, Terminating: []string{"gone"}},
	}, {
		name: "listed terminating namespace",
		spec: oriav1alpha1.ScopeInstanceSpec{Namespaces: []string{"gone"}},
		want: Targets{Terminating: []string{"gone"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveTargets(tt.spec, nss)
			require.Nil(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestResolveTargetsInvalidSelector(t *testing.T) {
	_, err := ResolveTargets(oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near", Values: []string{"x"}}},
	}}, nil)
	require.NotNil(t, err)
	assert.Equal(t, oriav1alpha1.ReasonInvalidSelector, err.Reason)
	assert.Contains(t, err.Message, `"Near" is not a valid label selector operator`)
}

func TestRoleBindings(t *testing.T) {
	inst := instance("inst")
	subjects := []rbacv1.Subject{
		sa("bot", ""),                          // the SA of that name in each namespace
		sa("builder", "ci"),                    // a fixed SA
		{Kind: rbacv1.UserKind, Name: "alice"}, // API group filled in
	}
	got := RoleBindings(inst, "tmpl", []string{"view", "edit"}, subjects, []string{"ns2", "ns1"})
	require.Len(t, got, 4)
	var keys []string
	for _, rb := range got {
		keys = append(keys, rb.Namespace+"/"+rb.RoleRef.Name)
		assert.Equal(t, BindingName("inst", rb.RoleRef.Name), rb.Name)
		assert.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: rb.RoleRef.Name}, rb.RoleRef)
		assert.Equal(t, map[string]string{
			oriav1alpha1.LabelManaged: "true", oriav1alpha1.LabelManagedBy: "oria", oriav1alpha1.LabelScopeInstance: "inst", oriav1alpha1.LabelScopeTemplate: "tmpl",
		}, rb.Labels)
		assert.Equal(t, types.UID("iuid"), rb.OwnerReferences[0].UID)
		assert.Equal(t, []rbacv1.Subject{
			{Kind: rbacv1.ServiceAccountKind, Name: "bot", Namespace: rb.Namespace},
			{Kind: rbacv1.ServiceAccountKind, Name: "builder", Namespace: "ci"},
			{Kind: rbacv1.UserKind, Name: "alice", APIGroup: rbacv1.GroupName},
		}, rb.Subjects)
	}
	// Sorted by namespace, then name.
	assert.Equal(t, "ns1", got[0].Namespace)
	assert.Equal(t, "ns2", got[3].Namespace)
	assert.ElementsMatch(t, []string{"ns1/view", "ns1/edit", "ns2/view", "ns2/edit"}, keys)
	assert.Less(t, got[0].Name, got[1].Name)
	// The template's subjects are not modified.
	assert.Empty(t, subjects[0].Namespace)
}

func TestClusterRoleBindings(t *testing.T) {
	inst := instance("inst")
	subjects := []rbacv1.Subject{sa("bot", "ops"), {Kind: rbacv1.GroupKind, Name: "devs"}}
	got := ClusterRoleBindings(inst, "tmpl", []string{"view", "edit"}, subjects)
	require.Len(t, got, 2)
	assert.Equal(t, BindingName("inst", "edit"), got[0].Name)
	assert.Equal(t, BindingName("inst", "view"), got[1].Name)
	assert.Equal(t, []rbacv1.Subject{sa("bot", "ops"), {Kind: rbacv1.GroupKind, Name: "devs", APIGroup: rbacv1.GroupName}}, got[0].Subjects)

	// A ServiceAccount without namespace cannot be bound cluster-wide.
	err := ValidateClusterSubjects([]rbacv1.Subject{sa("bot", "ops"), sa("fooserviceaccount", "")})
	require.NotNil(t, err)
	assert.Equal(t, oriav1alpha1.ReasonInvalidSubject, err.Reason)
	assert.Contains(t, err.Message, `subjects[1]: ServiceAccount "fooserviceaccount" has no namespace`)
	assert.Nil(t, ValidateClusterSubjects(subjects))
}

func TestKeepAndStale(t *testing.T) {
	inst := instance("inst")
	targets := Targets{Namespaces: []string{"a", "b"}, Terminating: []string{"dying"}}
	want := RoleBindings(inst, "tmpl", []string{"view"}, []rbacv1.Subject{sa("bot", "")}, targets.Namespaces)
	rb := func(ns, role string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: BindingName("inst", role)}}
	}
	existing := []*rbacv1.RoleBinding{
		rb("a", "view"),       // intended
		rb("a", "pending"),    // a pending role's binding in a target: kept
		rb("gone", "pending"), // ... outside the targets: stale
		rb("b", "old"),        // a removed role: stale
		rb("c", "view"),       // a namespace no longer targeted: stale
		rb("dying", "view"),   // a terminating target: left to the namespace controller
	}
	keep := Keep("inst", Objects(want), targets, []string{"pending"})
	var stale []string
	for _, o := range Stale(existing, keep, targets) {
		stale = append(stale, o.Namespace+"/"+o.Name)
	}
	assert.Equal(t, []string{
		"gone/" + BindingName("inst", "pending"),
		"b/" + BindingName("inst", "old"),
		"c/" + BindingName("inst", "view"),
	}, stale)

	// Cluster-wide: every RoleBinding is stale, pending ClusterRoleBindings
	// are kept.
	cluster := Targets{Cluster: true}
	crbs := []*rbacv1.ClusterRoleBinding{
		{ObjectMeta: metav1.ObjectMeta{Name: BindingName("inst", "pending")}},
		{ObjectMeta: metav1.ObjectMeta{Name: BindingName("inst", "old")}},
	}
	keep = Keep("inst", nil, cluster, []string{"pending"})
	assert.Len(t, Stale(existing, keep, cluster), len(existing))
	staleCRBs := Stale(crbs, keep, cluster)
	require.Len(t, staleCRBs, 1)
	assert.Equal(t, BindingName("inst", "old"), staleCRBs[0].Name)
}
