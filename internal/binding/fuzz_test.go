package binding

import (
	"cmp"
	"encoding/json"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// instanceCase is one input of FuzzInstanceBindings, as JSON: an instance,
// the namespaces of the cluster, its template's roles and subjects.
type instanceCase struct {
	Name       string                         `json:"name"`
	Spec       oriav1alpha1.ScopeInstanceSpec `json:"spec"`
	Namespaces []Namespace                    `json:"namespaces"`
	Roles      []string                       `json:"roles"`
	Subjects   []rbacv1.Subject               `json:"subjects"`
}

func addInstanceSeeds(f *testing.F) {
	nss := []Namespace{
		{Name: "a", Labels: map[string]string{"team": "x"}},
		{Name: "b", Labels: map[string]string{"team": "y"}},
		{Name: "c", Labels: map[string]string{"team": "x", "env": "prod"}},
		{Name: "d"},
		{Name: "gone", Labels: map[string]string{"team": "x"}, Terminating: true},
	}
	subj := []rbacv1.Subject{sa("bot", ""), sa("builder", "ci"), {Kind: rbacv1.UserKind, Name: "alice"}}
	team := func(v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"team": v}}
	}
	for _, c := range []instanceCase{
		{Name: "inst", Roles: []string{"view", "edit"}, Subjects: subj, Namespaces: nss},
		{Name: "inst", Spec: oriav1alpha1.ScopeInstanceSpec{Namespaces: []string{"d", "b", "nope", "d"}}, Roles: []string{"view"}, Subjects: subj, Namespaces: nss},
		{Name: "inst", Spec: oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: team("x")}, Roles: []string{"view", "edit"}, Subjects: subj, Namespaces: nss},
		{Name: "inst", Spec: oriav1alpha1.ScopeInstanceSpec{Namespaces: []string{"a", "d"}, NamespaceSelector: team("x")}, Roles: []string{"view"}, Namespaces: nss},
		{Name: "inst", Spec: oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"x", "y"}},
			{Key: "env", Operator: metav1.LabelSelectorOpDoesNotExist},
		}}}, Roles: []string{"view"}, Subjects: subj, Namespaces: nss},
		{Name: "inst", Spec: oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: &metav1.LabelSelector{}}, Roles: []string{"view"}, Namespaces: nss},
		{Name: "inst", Spec: oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "team", Operator: "Near", Values: []string{"x"}}}}}, Roles: []string{"view"}, Namespaces: nss},
	} {
		b, err := json.Marshal(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// The design document's bare labels, and a non-string value.
	f.Add([]byte(`{"name":"foo","spec":{"scopeTemplateName":"foo","namespaceSelector":{"fooKey":"barValue","team":5}},"namespaces":[{"Name":"foo","Labels":{"fooKey":"barValue"}}],"roles":["r"]}`))
}

// FuzzInstanceBindings: for any instance, cluster and template roles, what
// the ScopeInstance controller binds (ResolveTargets, then RoleBindings or
// ClusterRoleBindings) is deterministic, sorted, without duplicates, and
// within what the guard checks for the same spec (InstanceGrants): the
// check and the grant cannot drift apart.
func FuzzInstanceBindings(f *testing.F) {
	addInstanceSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var c instanceCase
		if json.Unmarshal(data, &c) != nil {
			return
		}
		// A cluster has each namespace once, under a name, and a valid
		// template each role once (ValidateTemplate).
		c.Namespaces = uniqueBy(slices.DeleteFunc(c.Namespaces, func(n Namespace) bool { return n.Name == "" }), func(n Namespace) string { return n.Name })
		c.Roles = uniqueBy(c.Roles, func(r string) string { return r })
		inst := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: c.Name, UID: "uid"}, Spec: c.Spec}

		targets, serr := ResolveTargets(c.Spec, c.Namespaces)
		again, serr2 := ResolveTargets(c.Spec, c.Namespaces)
		if diff := gocmp.Diff(targets, again); diff != "" || (serr == nil) != (serr2 == nil) {
			t.Fatalf("ResolveTargets is not deterministic:\n%s", diff)
		}
		grants := InstanceGrants(c.Spec, c.Roles)
		if diff := gocmp.Diff(grants, InstanceGrants(c.Spec, c.Roles)); diff != "" {
			t.Fatalf("InstanceGrants is not deterministic:\n%s", diff)
		}
		if !slices.IsSortedFunc(grants, compareGrants) || len(slices.CompactFunc(slices.Clone(grants), func(a, b Grant) bool { return a == b })) != len(grants) {
			t.Fatalf("InstanceGrants not sorted or with duplicates: %v", grants)
		}
		if serr != nil {
			return
		}
		if targets.Cluster != IsClusterWide(c.Spec) {
			t.Fatalf("Cluster = %v for %+v", targets.Cluster, c.Spec)
		}
		checkTargets(t, c, targets)
		covered := func(role, ns string) bool {
			_, wide := slices.BinarySearchFunc(grants, Grant{Role: role}, compareGrants)
			_, there := slices.BinarySearchFunc(grants, Grant{Role: role, Namespace: ns}, compareGrants)
			return wide || there
		}
		if targets.Cluster {
			crbs := ClusterRoleBindings(inst, "tmpl", c.Roles, c.Subjects)
			checkBindings(t, crbs, len(c.Roles), inst.Name)
			for _, b := range crbs {
				if !covered(b.RoleRef.Name, "") {
					t.Errorf("ClusterRoleBinding of %q is not checked cluster-wide by InstanceGrants %v", b.RoleRef.Name, grants)
				}
			}
			return
		}
		rbs := RoleBindings(inst, "tmpl", c.Roles, c.Subjects, targets.Namespaces)
		checkBindings(t, rbs, len(c.Roles)*len(targets.Namespaces), inst.Name)
		for _, b := range rbs {
			if !slices.Contains(targets.Namespaces, b.Namespace) {
				t.Errorf("RoleBinding in %q, not a target", b.Namespace)
			}
			if !covered(b.RoleRef.Name, b.Namespace) {
				t.Errorf("RoleBinding of %q in %q is not checked by InstanceGrants %v", b.RoleRef.Name, b.Namespace, grants)
			}
			for _, s := range b.Subjects {
				if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == "" {
					t.Errorf("RoleBinding in %q names ServiceAccount %q without a namespace", b.Namespace, s.Name)
				}
			}
		}
	})
}

func compareGrants(a, b Grant) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Role, b.Role))
}

func uniqueBy[T any](in []T, key func(T) string) []T {
	seen := map[string]bool{}
	return slices.DeleteFunc(in, func(v T) bool {
		k := key(v)
		if seen[k] {
			return true
		}
		seen[k] = true
		return false
	})
}

// checkTargets: each list sorted and unique, the three disjoint, every
// listed namespace in exactly one of them.
func checkTargets(t *testing.T, c instanceCase, targets Targets) {
	t.Helper()
	where := map[string]int{}
	for _, list := range [][]string{targets.Namespaces, targets.Terminating, targets.Missing} {
		if !slices.IsSorted(list) {
			t.Errorf("not sorted: %v", list)
		}
		for _, n := range list {
			where[n]++
		}
	}
	for n, count := range where {
		if count > 1 {
			t.Errorf("namespace %q appears %d times in %+v", n, count, targets)
		}
	}
	if targets.Cluster {
		if len(where) > 0 {
			t.Errorf("cluster-wide targets with namespaces: %+v", targets)
		}
		return
	}
	for _, n := range c.Spec.Namespaces {
		if where[n] != 1 {
			t.Errorf("listed namespace %q is in %d of the target lists: %+v", n, where[n], targets)
		}
	}
	for _, n := range targets.Missing {
		if !slices.Contains(c.Spec.Namespaces, n) {
			t.Errorf("missing namespace %q was not listed", n)
		}
	}
}

// checkBindings: want bindings, sorted by namespace then name, no two the
// same, each named for its role.
func checkBindings[T interface {
	*rbacv1.RoleBinding | *rbacv1.ClusterRoleBinding
	GetNamespace() string
	GetName() string
}](t *testing.T, bindings []T, want int, instance string) {
	t.Helper()
	if len(bindings) != want {
		t.Fatalf("%d bindings, want %d", len(bindings), want)
	}
	key := func(b T) string { return b.GetNamespace() + "/" + b.GetName() }
	for i := 1; i < len(bindings); i++ {
		if a, b := bindings[i-1], bindings[i]; cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName())) >= 0 {
			t.Errorf("bindings not sorted, or duplicated: %s then %s", key(a), key(b))
		}
	}
	for _, b := range bindings {
		var role string
		switch o := any(b).(type) {
		case *rbacv1.RoleBinding:
			role = o.RoleRef.Name
		case *rbacv1.ClusterRoleBinding:
			role = o.RoleRef.Name
		}
		if b.GetName() != BindingName(instance, role) {
			t.Errorf("binding %s of role %q is not named BindingName", key(b), role)
		}
	}
}

func addTemplateSeeds(f *testing.F) {
	for _, tmpl := range []*oriav1alpha1.ScopeTemplate{
		template("foo", []oriav1alpha1.ClusterRoleTemplate{{GenerateName: "fooClusterRole-", Rules: podRules}}, sa("foo-service-account", "")),
		template("foo", []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}, {Name: "inline", Rules: podRules}, {GenerateName: "gen-", Rules: podRules}},
			rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "devs"}),
		template("foo", []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}, {Name: "view"}}, sa("bot", "ops")),
		template("foo", []oriav1alpha1.ClusterRoleTemplate{{Name: "broken", Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{}}}}}, sa("bot", "")),
		template("foo", []oriav1alpha1.ClusterRoleTemplate{{Name: "urls", Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/healthz"}, Verbs: []string{"get"}, Resources: []string{"pods"}}}}},
			rbacv1.Subject{Kind: "Robot", Name: "r2"}),
		template("foo", []oriav1alpha1.ClusterRoleTemplate{{Name: "a/b"}, {GenerateName: "g-"}, {}, {Name: "x", GenerateName: "y-", Rules: podRules}}, sa("Bad_Name", "ns!")),
	} {
		b, err := json.Marshal(tmpl)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzValidateTemplate: validating any template never panics and is
// deterministic; a template it accepts has unique, usable role names, and
// its inline ClusterRoles are sorted, one per inline role, as oria writes
// them.
func FuzzValidateTemplate(f *testing.F) {
	addTemplateSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		tmpl := &oriav1alpha1.ScopeTemplate{}
		if json.Unmarshal(data, tmpl) != nil {
			return
		}
		serr := ValidateTemplate(tmpl)
		if diff := gocmp.Diff(serr, ValidateTemplate(tmpl)); diff != "" {
			t.Fatalf("ValidateTemplate is not deterministic:\n%s", diff)
		}
		roles := Roles(tmpl)
		if len(roles) != len(tmpl.Spec.ClusterRoles) {
			t.Fatalf("%d roles for %d clusterRoles", len(roles), len(tmpl.Spec.ClusterRoles))
		}
		_ = ValidateClusterSubjects(tmpl.Spec.BindingTemplate.Subjects)
		if serr != nil {
			if serr.Reason == "" || serr.Message == "" {
				t.Errorf("a SpecError without a reason or a message: %+v", serr)
			}
			return
		}
		names := RoleNames(roles)
		if len(uniqueBy(slices.Clone(names), func(n string) string { return n })) != len(names) {
			t.Errorf("valid template with duplicate role names: %v", names)
		}
		inline := 0
		for _, r := range roles {
			if msgs := path.IsValidPathSegmentName(r.Name); r.Name == "" || len(msgs) > 0 {
				t.Errorf("valid template with role name %q: %v", r.Name, msgs)
			}
			if r.Inline {
				inline++
			}
		}
		crs := ClusterRoles(tmpl)
		if len(crs) != inline || !slices.IsSortedFunc(crs, func(a, b *rbacv1.ClusterRole) int { return cmp.Compare(a.Name, b.Name) }) {
			t.Errorf("ClusterRoles: %d, sorted %v; want %d inline roles, sorted", len(crs), slices.IsSortedFunc(crs, func(a, b *rbacv1.ClusterRole) int { return cmp.Compare(a.Name, b.Name) }), inline)
		}
		for _, cr := range crs {
			if len(cr.Rules) == 0 || len(cr.OwnerReferences) != 1 || cr.OwnerReferences[0].Name != tmpl.Name {
				t.Errorf("ClusterRole %q: %d rules, owners %v", cr.Name, len(cr.Rules), cr.OwnerReferences)
			}
		}
	})
}
