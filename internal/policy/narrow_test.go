package policy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

func TestNarrow(t *testing.T) {
	const crd = "applications.argoproj.io"
	group := func(n string) rbacv1.Subject { return rbacv1.Subject{Kind: rbacv1.GroupKind, Name: n} }
	normGroup := func(n string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: n}
	}
	saNoNS := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "bot"}
	env := func(v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"env": v}}
	}
	tier := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpExists}}}
	bogus := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Bogus"}}}
	ceiling := func(n string) *oriav1alpha1.ServiceAccountReference {
		return &oriav1alpha1.ServiceAccountReference{Namespace: "ops", Name: n}
	}
	// The grant in force: edit for two groups in victim and d-ns.
	before := func(mutate ...func(*oriav1alpha1.RBACPolicySpec)) func(*oriav1alpha1.RBACPolicySpec) {
		return func(s *oriav1alpha1.RBACPolicySpec) {
			s.Subjects = []rbacv1.Subject{group("admins"), group("d")}
			s.Namespaces = []string{"victim", "d-ns"}
			for _, m := range mutate {
				m(s)
			}
		}
	}
	type want struct {
		roles    []string
		subjects []rbacv1.Subject
		target   oriav1alpha1.ScopeInstanceSpec
		removed  []string
	}
	edit, view, crdview := crd+"-edit", crd+"-view", crd+"-view-crdview"
	name := ObjectName("devs")
	for _, tc := range []struct {
		name   string
		before func(*oriav1alpha1.RBACPolicySpec)
		after  func(*oriav1alpha1.RBACPolicySpec)
		// withheld are roles the current spec would bind but may not.
		withheld []string
		want     *want // nil: nothing kept
		removed  []string
	}{{
		name:   "invalid subject added, nothing else: everything stays",
		before: before(),
		after:  func(s *oriav1alpha1.RBACPolicySpec) { s.Subjects = append(s.Subjects, saNoNS) },
		want: &want{roles: []string{edit, view, crdview}, subjects: []rbacv1.Subject{normGroup("admins"), normGroup("d")},
			target: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: name, Namespaces: []string{"d-ns", "victim"}}},
	}, {
		name:   "the admin narrows the namespaces of an invalid policy",
		before: before(),
		after: func(s *oriav1alpha1.RBACPolicySpec) {
			s.Subjects = append(s.Subjects, saNoNS)
			s.Namespaces = []string{"d-ns", "new-one"}
		},
		want: &want{roles: []string{edit, view, crdview}, subjects: []rbacv1.Subject{normGroup("admins"), normGroup("d")},
			target:  oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: name, Namespaces: []string{"d-ns"}},
			removed: []string{`namespace "victim"`}},
	}, {
		name:   "a subject removed and one added: the removal lands, the addition waits",
		before: before(),
		after: func(s *oriav1alpha1.RBACPolicySpec) {
			s.Subjects = []rbacv1.Subject{group("admins"), group("new"), saNoNS}
		},
		want: &want{roles: []string{edit, view, crdview}, subjects: []rbacv1.Subject{normGroup("admins")},
			target:  oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: name, Namespaces: []string{"d-ns", "victim"}},
			removed: []string{"subject Group d"}},
	}, {
		name:   "access lowered to view: edit goes",
		before: before(),
		after: func(s *oriav1alpha1.RBACPolicySpec) {
			s.Subjects = append(s.Subjects, saNoNS)
			s.Access = oriav1alpha1.AccessView
		},
		want: &want{roles: []string{view, crdview}, subjects: []rbacv1.Subject{normGroup("admins"), normGroup("d")},
			target:  oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: name, Namespaces: []string{"d-ns", "victim"}},
			removed: []string{`ClusterRole "` + edit + `"`}},
	}, {
		name:     "a role now withheld goes",
		before:   before(),
		after:    func(s *oriav1alpha1.RBACPolicySpec) { s.Subjects = append(s.Subjects, saNoNS) },
		withheld: []string{view},
		want: &want{roles: []string{edit, crdview}, subjects: []rbacv1.Subject{normGroup("admins"), normGroup("d")},
			target:  oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: name, Namespaces: []string{"d-ns", "victim"}},
			removed: []string{`ClusterRole "` + view + `"`}},
	}, {
		name:   "no namespace left: nothing kept",
		before: before(),
		after: func(s *oriav1alpha1.RBACPolicySpec) {
			s.Subjects = append(s.Subjects, saNoNS)
			s.Namespaces = []string{"other"}
		},
		removed: []string{`namespace "d-ns"`, `namespace "victim"`},
	}, {
		name:    "no subject left: nothing kept",
		before:  before(),
		after:   func(s *oriav1alpha1.RBACPolicySpec) { s.Subjects = []rbacv1.Subject{saNoNS} },
		removed: []string{"subject Group admins", "subject Group d"},
	}, {
		name:   "cluster-wide before, namespaces now: only those",
		before: before(func(s *oriav1alpha1.RBACPolicySpec) { s.Namespaces = nil }),
		after: func(s *oriav1alpha1.RBACPolicySpec) {
			s.Subjects = append(s.Subjects, saNoNS)
			s.Namespaces = []string{"b", "a", "b"}
		},
		want: &want{roles: []string{edit, view, crdview}, subjects: []rbacv1.Subject{normGroup("admins"), normGroup("d")},
			target:  oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: name, Namespaces: []string{"a", "b"}},
			removed: []string{"the cluster-wide grant (the spec names namespaces)"}},
	}, {
		name:   "namespaces before, cluster-wide now: never widened",
		before: before(),
		after:  func(s *oriav1alpha1.RBACPolicySpec) { s.Subjects = append(s.Subjects, saNoNS); s.Namespaces = nil },
		want: &want{roles: []string{edit, view, crdview}, subjects: []rbacv1.Subject{normGroup("admins"), normGroup("d")},
			target: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: name, Namespaces: []string{"d-ns", "victim"}}},
	}, {
		name:   "selector changed: both selectors at once",
		before: before(func(s *oriav1alpha1.RBACPolicySpec) { s.Namespaces, s.NamespaceSelector = nil, env("dev") }),
		after: func(s *oriav1alpha1.RBACPolicySpec) {
			s.Subjects = append(s.Subjects, saNoNS)
			s.Namespaces, s.NamespaceSelector = nil, tier
		},
		want: &want{roles: []string{edit, view, crdview}, subjects: []rbacv1.Subject{normGroup("admins"), normGroup("d")},
			target: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: name, NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"env": "dev"}, MatchExpressions: tier.MatchExpressions}},
			removed: []string{`namespaces selected by "env=dev" unless the current selector selects them too`}},
	}, {
		name:   "selector value changed: matches nothing, but stays a selector",
		before: before(func(s *oriav1alpha1.RBACPolicySpec) { s.Namespaces, s.NamespaceSelector = nil, env("dev") }),
		after: func(s *oriav1alpha1.RBACPolicySpec) {
			s.Subjects = append(s.Subjects, saNoNS)
			s.Namespaces, s.NamespaceSelector = nil, env("prod")
		},
		want: &want{roles: []string{edit, view, crdview}, subjects: []rbacv1.Subject{normGroup("admins"), normGroup("d")},
			target: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: name, NamespaceSelector: &metav1.LabelSelector{
				MatchLabels:      map[string]string{"env": "dev"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"prod"}}}}},
			removed: []string{`namespaces selected by "env=dev" unless the current selector selects them too`}},
	}, {
		name:    "selector now invalid: undecidable, nothing kept",
		before:  before(func(s *oriav1alpha1.RBACPolicySpec) { s.Namespaces, s.NamespaceSelector = nil, env("dev") }),
		after:   func(s *oriav1alpha1.RBACPolicySpec) { s.Namespaces, s.NamespaceSelector = nil, bogus },
		removed: []string{`namespaces selected by "env=dev" unless the current selector selects them too`},
	}, {
		name:   "selector before, namespaces now: undecidable, nothing kept",
		before: before(func(s *oriav1alpha1.RBACPolicySpec) { s.Namespaces, s.NamespaceSelector = nil, env("dev") }),
		after: func(s *oriav1alpha1.RBACPolicySpec) {
			s.Subjects = append(s.Subjects, saNoNS)
			s.Namespaces, s.NamespaceSelector = []string{"victim"}, nil
		},
		removed: []string{`namespaces selected by "env=dev" unless the current selector selects them too`},
	}, {
		name:   "namespaces before, selector now: undecidable, nothing kept",
		before: before(),
		after: func(s *oriav1alpha1.RBACPolicySpec) {
			s.Subjects = append(s.Subjects, saNoNS)
			s.Namespaces, s.NamespaceSelector = nil, env("dev")
		},
		removed: []string{`namespace "d-ns"`, `namespace "victim"`},
	}, {
		name:   "ceiling removed from the spec: the old ceiling stays",
		before: before(func(s *oriav1alpha1.RBACPolicySpec) { s.ServiceAccount = ceiling("a") }),
		after:  func(s *oriav1alpha1.RBACPolicySpec) { s.Subjects = append(s.Subjects, saNoNS); s.ServiceAccount = nil },
		want: &want{roles: []string{edit, view, crdview}, subjects: []rbacv1.Subject{normGroup("admins"), normGroup("d")},
			target: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: name, Namespaces: []string{"d-ns", "victim"}, ServiceAccount: ceiling("a")}},
	}, {
		name:   "ceiling added: it applies at once",
		before: before(),
		after: func(s *oriav1alpha1.RBACPolicySpec) {
			s.Subjects = append(s.Subjects, saNoNS)
			s.ServiceAccount = ceiling("b")
		},
		want: &want{roles: []string{edit, view, crdview}, subjects: []rbacv1.Subject{normGroup("admins"), normGroup("d")},
			target: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: name, Namespaces: []string{"d-ns", "victim"}, ServiceAccount: ceiling("b")}},
	}, {
		name:   "ceiling changed: the two cannot be compared, nothing kept",
		before: before(func(s *oriav1alpha1.RBACPolicySpec) { s.ServiceAccount = ceiling("a") }),
		after: func(s *oriav1alpha1.RBACPolicySpec) {
			s.Subjects = append(s.Subjects, saNoNS)
			s.ServiceAccount = ceiling("b")
		},
		removed: []string{"everything granted through ServiceAccount ops/a (spec.serviceAccount names another one)"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			old := Compile(policy(oriav1alpha1.AccessEdit, tc.before), []string{crd})
			cur := policy(oriav1alpha1.AccessEdit, tc.before, tc.after)
			c := Compile(cur, []string{crd})
			withheld := map[string]string{}
			for _, r := range tc.withheld {
				withheld[r] = "withheld"
			}
			c.Withhold(withheld)
			got := Narrow(cur, c.Roles, old.Template, old.Instance)
			if tc.want == nil {
				if got.Template != nil || got.Instance != nil {
					t.Errorf("Narrow kept %+v, %+v; want nothing", got.Template, got.Instance)
				}
				if diff := cmp.Diff(tc.removed, got.Removed); diff != "" {
					t.Errorf("Removed (-want +got):\n%s", diff)
				}
				return
			}
			if got.Template == nil || got.Instance == nil {
				t.Fatalf("Narrow kept nothing (removed %v)", got.Removed)
			}
			var roles []string
			for _, r := range got.Template.Spec.ClusterRoles {
				roles = append(roles, r.Name)
			}
			gotWant := want{roles: roles, subjects: got.Template.Spec.BindingTemplate.Subjects, target: got.Instance.Spec, removed: got.Removed}
			if diff := cmp.Diff(*tc.want, gotWant, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("Narrow (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(old.Template.ObjectMeta, got.Template.ObjectMeta); diff != "" {
				t.Errorf("template metadata (-compiled +narrowed):\n%s", diff)
			}
			// Narrowing what was narrowed changes nothing: no write churn.
			again := Narrow(cur, c.Roles, got.Template, got.Instance)
			if diff := cmp.Diff(got.Template.Spec, again.Template.Spec); diff != "" {
				t.Errorf("second narrowing changed the template (-first +second):\n%s", diff)
			}
			if diff := cmp.Diff(got.Instance.Spec, again.Instance.Spec); diff != "" {
				t.Errorf("second narrowing changed the instance (-first +second):\n%s", diff)
			}
			if len(again.Removed) > 0 && len(got.Removed) == 0 {
				t.Errorf("second narrowing removed %v", again.Removed)
			}
		})
	}
}

func TestNarrowNothingInForce(t *testing.T) {
	p := policy(oriav1alpha1.AccessView)
	c := Compile(p, []string{"applications.argoproj.io"})
	for name, n := range map[string]Narrowed{
		"no template": Narrow(p, c.Roles, nil, c.Instance),
		"no instance": Narrow(p, c.Roles, c.Template, nil),
	} {
		if n.Template != nil || n.Instance != nil || len(n.Removed) > 0 {
			t.Errorf("%s: Narrow = %+v, want nothing", name, n)
		}
	}
}

func TestAndSelectors(t *testing.T) {
	req := func(k string, op metav1.LabelSelectorOperator, v ...string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: k, Operator: op, Values: v}
	}
	for _, tc := range []struct {
		name string
		a, b *metav1.LabelSelector
		want *metav1.LabelSelector
	}{{
		name: "same",
		a:    &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}},
		b:    &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}},
		want: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}},
	}, {
		name: "different keys",
		a:    &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}},
		b:    &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}, MatchExpressions: []metav1.LabelSelectorRequirement{req("x", metav1.LabelSelectorOpExists)}},
		want: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev", "team": "a"}, MatchExpressions: []metav1.LabelSelectorRequirement{req("x", metav1.LabelSelectorOpExists)}},
	}, {
		name: "same key, other value",
		a:    &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}},
		b:    &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
		want: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}, MatchExpressions: []metav1.LabelSelectorRequirement{req("env", metav1.LabelSelectorOpIn, "prod")}},
	}, {
		name: "shared expressions once",
		a:    &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req("x", metav1.LabelSelectorOpExists)}},
		b:    &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req("x", metav1.LabelSelectorOpExists), req("y", metav1.LabelSelectorOpNotIn, "1")}},
		want: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req("x", metav1.LabelSelectorOpExists), req("y", metav1.LabelSelectorOpNotIn, "1")}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := AndSelectors(tc.a, tc.b)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("AndSelectors (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(got, AndSelectors(got, tc.b)); diff != "" {
				t.Errorf("not idempotent (-once +twice):\n%s", diff)
			}
		})
	}
}
