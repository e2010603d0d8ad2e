package policy

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
)

// compileCase is one input of FuzzCompile, as JSON: a policy and the CRDs
// of its extension.
type compileCase struct {
	Policy *oriav1alpha1.RBACPolicy `json:"policy"`
	CRDs   []string                 `json:"crds"`
}

// FuzzCompile: compiling any policy never panics and is deterministic
// (whatever the order of the CRDs); the APIs are sorted, unique and the
// extension's; the template binds exactly the roles Compile names, each
// once; the instance binds the template where the policy says, its
// namespaces sorted and unique; and ValidateSubjects never panics.
func FuzzCompile(f *testing.F) {
	for _, c := range []compileCase{
		{policy(oriav1alpha1.AccessView), crds},
		{policy(oriav1alpha1.AccessEdit, func(s *oriav1alpha1.RBACPolicySpec) {
			s.Namespaces = []string{"team-b", "team-a", "team-b"}
			s.APIs = []oriav1alpha1.APIRef{{Group: "argoproj.io", Resource: "applications"}, {Group: "argoproj.io", Resource: "missing"}}
		}), crds},
		{policy(oriav1alpha1.AccessAdmin, func(s *oriav1alpha1.RBACPolicySpec) {
			s.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "dev"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}
			s.Subjects = append(s.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "bot"})
			s.ServiceAccount = &oriav1alpha1.ServiceAccountReference{Namespace: "ops", Name: "ceiling"}
		}), []string{"b.example.com", "a.example.com", "a.example.com"}},
		{policy(oriav1alpha1.AccessView), nil},
	} {
		b, err := json.Marshal(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var c compileCase
		if json.Unmarshal(data, &c) != nil || c.Policy == nil {
			return
		}
		_ = ValidateSubjects(c.Policy.Spec.Subjects)
		got := Compile(c.Policy, c.CRDs)
		reversed := slices.Clone(c.CRDs)
		slices.Reverse(reversed)
		if diff := cmp.Diff(got, Compile(c.Policy, reversed)); diff != "" {
			t.Fatalf("Compile depends on the order of the CRDs, or is not deterministic:\n%s", diff)
		}
		for name, list := range map[string][]string{"APIs": got.APIs, "Missing": got.Missing} {
			if !slices.IsSorted(list) || len(slices.Compact(slices.Clone(list))) != len(list) {
				t.Errorf("%s not sorted or with duplicates: %v", name, list)
			}
		}
		for _, api := range got.APIs {
			if !slices.Contains(c.CRDs, api) {
				t.Errorf("API %q is not one of the extension's", api)
			}
		}
		if (got.Template == nil) != (got.Instance == nil) || (got.Template == nil) != (len(got.APIs) == 0) {
			t.Fatalf("template %v, instance %v for APIs %v", got.Template != nil, got.Instance != nil, got.APIs)
		}
		if got.Template == nil {
			return
		}
		var roles []string
		for _, r := range got.Template.Spec.ClusterRoles {
			roles = append(roles, binding.RoleName(got.Template.Name, r))
			if len(r.Rules) > 0 || r.GenerateName != "" {
				t.Errorf("a compiled role is not a reference by name: %+v", r)
			}
		}
		if diff := cmp.Diff(got.Roles, roles); diff != "" {
			t.Errorf("template roles differ from Roles (-Roles +template):\n%s", diff)
		}
		if len(slices.Compact(slices.Sorted(slices.Values(roles)))) != len(roles) {
			t.Errorf("a role bound twice: %v", roles)
		}
		spec := got.Instance.Spec
		if spec.ScopeTemplateName != got.Template.Name {
			t.Errorf("instance binds %q, template is %q", spec.ScopeTemplateName, got.Template.Name)
		}
		if !slices.IsSorted(spec.Namespaces) || len(slices.Compact(slices.Clone(spec.Namespaces))) != len(spec.Namespaces) {
			t.Errorf("instance namespaces not sorted or with duplicates: %v", spec.Namespaces)
		}
		want := slices.Compact(slices.Sorted(slices.Values(c.Policy.Spec.Namespaces)))
		if !equality.Semantic.DeepEqual(want, spec.Namespaces) || !equality.Semantic.DeepEqual(c.Policy.Spec.NamespaceSelector, spec.NamespaceSelector) ||
			!equality.Semantic.DeepEqual(c.Policy.Spec.ServiceAccount, spec.ServiceAccount) {
			t.Errorf("instance spec %+v does not say where the policy %+v binds", spec, c.Policy.Spec)
		}
		// What the guard checks for the compiled objects.
		grants := binding.InstanceGrants(spec, got.Roles)
		if binding.IsClusterWide(spec) != (len(c.Policy.Spec.Namespaces) == 0 && c.Policy.Spec.NamespaceSelector == nil) {
			t.Errorf("cluster-wide %v for policy %+v", binding.IsClusterWide(spec), c.Policy.Spec)
		}
		if len(got.Roles) > 0 && len(grants) == 0 && (binding.IsClusterWide(spec) || spec.NamespaceSelector != nil) {
			t.Errorf("a cluster-wide or selector instance with roles checks nothing")
		}
	})
}
