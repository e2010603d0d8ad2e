package policy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

func policy(access oriav1alpha1.Access, mutate ...func(*oriav1alpha1.RBACPolicySpec)) *oriav1alpha1.RBACPolicy {
	p := &oriav1alpha1.RBACPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "devs", UID: "uid-1"},
		Spec: oriav1alpha1.RBACPolicySpec{
			ExtensionName: "argocd",
			Access:        access,
			Subjects:      []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "developers"}},
		},
	}
	for _, m := range mutate {
		m(&p.Spec)
	}
	return p
}

var crds = []string{"appprojects.argoproj.io", "applications.argoproj.io"}

func TestCompileRoles(t *testing.T) {
	for _, tc := range []struct {
		name    string
		policy  *oriav1alpha1.RBACPolicy
		crds    []string
		apis    []string
		missing []string
		roles   []string
	}{
		{
			name:   "view binds view and crdview for every API, sorted",
			policy: policy(oriav1alpha1.AccessView),
			crds:   crds,
			apis:   []string{"applications.argoproj.io", "appprojects.argoproj.io"},
			roles: []string{
				"applications.argoproj.io-view", "applications.argoproj.io-view-crdview",
				"appprojects.argoproj.io-view", "appprojects.argoproj.io-view-crdview",
			},
		},
		{
			name:   "edit also binds view and crdview, since -edit has no read verbs",
			policy: policy(oriav1alpha1.AccessEdit),
			crds:   crds[:1],
			apis:   []string{"appprojects.argoproj.io"},
			roles:  []string{"appprojects.argoproj.io-edit", "appprojects.argoproj.io-view", "appprojects.argoproj.io-view-crdview"},
		},
		{
			name:   "admin binds admin and crdview",
			policy: policy(oriav1alpha1.AccessAdmin),
			crds:   crds[1:],
			apis:   []string{"applications.argoproj.io"},
			roles:  []string{"applications.argoproj.io-admin", "applications.argoproj.io-view-crdview"},
		},
		{
			name: "apis narrow the grant and report what the extension lacks",
			policy: policy(oriav1alpha1.AccessView, func(s *oriav1alpha1.RBACPolicySpec) {
				s.APIs = []oriav1alpha1.APIRef{{Group: "argoproj.io", Resource: "applications"}, {Group: "argoproj.io", Resource: "rollouts"}}
			}),
			crds:    crds,
			apis:    []string{"applications.argoproj.io"},
			missing: []string{"rollouts.argoproj.io"},
			roles:   []string{"applications.argoproj.io-view", "applications.argoproj.io-view-crdview"},
		},
		{
			name:   "no API: nothing to compile",
			policy: policy(oriav1alpha1.AccessView),
			crds:   nil,
		},
		{
			name: "long CRD names give shortened role names",
			policy: policy(oriav1alpha1.AccessView, func(s *oriav1alpha1.RBACPolicySpec) {
				s.APIs = nil
			}),
			crds:  []string{"things." + strings.Repeat("x", 240) + ".io"},
			apis:  []string{"things." + strings.Repeat("x", 240) + ".io"},
			roles: nil, // checked below: shortened, not listed literally
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Compile(tc.policy, tc.crds)
			if diff := cmp.Diff(tc.apis, got.APIs); diff != "" {
				t.Errorf("APIs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.missing, got.Missing); diff != "" {
				t.Errorf("Missing (-want +got):\n%s", diff)
			}
			if len(tc.apis) == 0 {
				if got.Template != nil || got.Instance != nil {
					t.Fatalf("no API must compile to nothing, got %v %v", got.Template, got.Instance)
				}
				return
			}
			if tc.roles != nil {
				if diff := cmp.Diff(tc.roles, got.Roles); diff != "" {
					t.Errorf("Roles (-want +got):\n%s", diff)
				}
			}
			for _, r := range got.Roles {
				if len(r) > 253 {
					t.Errorf("role name longer than 253: %d", len(r))
				}
			}
			spec := got.Template.Spec
			var bound []string
			for _, r := range spec.ClusterRoles {
				if len(r.Rules) != 0 || r.GenerateName != "" {
					t.Errorf("policy templates must only reference roles, got %+v", r)
				}
				bound = append(bound, r.Name)
			}
			if diff := cmp.Diff(got.Roles, bound); diff != "" {
				t.Errorf("template roles (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompileObjects(t *testing.T) {
	p := policy(oriav1alpha1.AccessView, func(s *oriav1alpha1.RBACPolicySpec) {
		s.Namespaces = []string{"team-b", "team-a", "team-b"}
		s.NamespaceSelector = &metav1.LabelSelector{
			MatchLabels:      map[string]string{"tier": "dev"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}},
		}
		s.Subjects = append(s.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "bot", Namespace: "ci"})
	})
	got := Compile(p, crds[1:])

	if got.Template.GetName() != "rbacpolicy-devs" || got.Instance.GetName() != "rbacpolicy-devs" {
		t.Errorf("names = %q, %q", got.Template.GetName(), got.Instance.GetName())
	}
	wantLabels := map[string]string{"app.kubernetes.io/managed-by": "oria", "oria.operatorframework.io/managed": "true", "oria.operatorframework.io/rbac-policy": "devs"}
	if diff := cmp.Diff(wantLabels, got.Template.Labels); diff != "" {
		t.Errorf("template labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantLabels, got.Instance.Labels); diff != "" {
		t.Errorf("instance labels (-want +got):\n%s", diff)
	}
	for _, refs := range [][]string{{got.Template.OwnerReferences[0].Name, string(got.Template.OwnerReferences[0].UID)},
		{got.Instance.OwnerReferences[0].Name, string(got.Instance.OwnerReferences[0].UID)}} {
		if diff := cmp.Diff([]string{"devs", "uid-1"}, refs); diff != "" {
			t.Errorf("owner (-want +got):\n%s", diff)
		}
	}
	if !*got.Instance.OwnerReferences[0].Controller {
		t.Error("the policy must be the controller owner")
	}

	tspec := got.Template.Spec
	wantSubjects := []rbacv1.Subject{
		{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "developers"},
		{Kind: rbacv1.ServiceAccountKind, Name: "bot", Namespace: "ci"},
	}
	if diff := cmp.Diff(wantSubjects, tspec.BindingTemplate.Subjects); diff != "" {
		t.Errorf("subjects (-want +got):\n%s", diff)
	}

	ispec := got.Instance.Spec
	want := oriav1alpha1.ScopeInstanceSpec{
		ScopeTemplateName: "rbacpolicy-devs",
		Namespaces:        []string{"team-a", "team-b"},
		NamespaceSelector: p.Spec.NamespaceSelector,
	}
	if diff := cmp.Diff(want, ispec); diff != "" {
		t.Errorf("instance spec (-want +got):\n%s", diff)
	}
}

func TestCompileClusterWide(t *testing.T) {
	got := Compile(policy(oriav1alpha1.AccessAdmin), crds)
	spec := got.Instance.Spec
	if spec.Namespaces != nil || spec.NamespaceSelector != nil {
		t.Errorf("a policy without namespaces must compile to a cluster-wide instance, got %+v", spec)
	}
}

func TestCompileIsDeterministic(t *testing.T) {
	p := policy(oriav1alpha1.AccessEdit)
	a := Compile(p, []string{"b.example.com", "a.example.com"})
	b := Compile(p, []string{"a.example.com", "b.example.com"})
	if diff := cmp.Diff(a.Roles, b.Roles); diff != "" {
		t.Errorf("CRD order changed the result (-a +b):\n%s", diff)
	}
}

func TestObjectNameLong(t *testing.T) {
	n := ObjectName(strings.Repeat("p", 253))
	if len(n) > 253 || !strings.HasPrefix(n, "rbacpolicy-") {
		t.Errorf("ObjectName = %q (%d)", n, len(n))
	}
}

func TestValidateSubjects(t *testing.T) {
	for _, tc := range []struct {
		name    string
		subject rbacv1.Subject
		want    string
	}{
		{"user ok", rbacv1.Subject{Kind: "User", Name: "alice"}, ""},
		{"group with api group ok", rbacv1.Subject{Kind: "Group", APIGroup: rbacv1.GroupName, Name: "devs"}, ""},
		{"sa ok", rbacv1.Subject{Kind: "ServiceAccount", Name: "bot", Namespace: "ci"}, ""},
		{"sa without namespace", rbacv1.Subject{Kind: "ServiceAccount", Name: "bot"}, `subjects[0]: ServiceAccount "bot" needs a namespace`},
		{"sa with api group", rbacv1.Subject{Kind: "ServiceAccount", Name: "bot", Namespace: "ci", APIGroup: "x"}, "a ServiceAccount has no apiGroup"},
		{"invalid ServiceAccount name, as the API server would refuse it", rbacv1.Subject{Kind: "ServiceAccount", Name: "Bad_SA!", Namespace: "ci"}, `ServiceAccount name "Bad_SA!" is not valid`},
		{"unknown kind", rbacv1.Subject{Kind: "Robot", Name: "r2"}, `kind "Robot" is not one of User, Group, ServiceAccount`},
		{"lower-case kind", rbacv1.Subject{Kind: "user", Name: "alice"}, `kind "user"`},
		{"empty name", rbacv1.Subject{Kind: "User"}, "spec.subjects[0]: name is required"},
		{"wrong group", rbacv1.Subject{Kind: "User", Name: "a", APIGroup: "example.com"}, `apiGroup of a User must be "rbac.authorization.k8s.io"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(ValidateSubjects([]rbacv1.Subject{tc.subject}), "; ")
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("ValidateSubjects = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWithhold(t *testing.T) {
	c := Compile(policy(oriav1alpha1.AccessView), crds)
	why := c.Withhold(map[string]string{"applications.argoproj.io-view": "too broad", "unrelated-view": "not bound anyway"})
	if diff := cmp.Diff([]string{"too broad"}, why); diff != "" {
		t.Errorf("reasons (-want +got):\n%s", diff)
	}
	want := []string{"applications.argoproj.io-view-crdview", "appprojects.argoproj.io-view", "appprojects.argoproj.io-view-crdview"}
	if diff := cmp.Diff(want, c.Roles); diff != "" {
		t.Errorf("roles (-want +got):\n%s", diff)
	}
	var inTemplate []string
	for _, r := range c.Template.Spec.ClusterRoles {
		inTemplate = append(inTemplate, r.Name)
	}
	if diff := cmp.Diff(want, inTemplate); diff != "" {
		t.Errorf("template roles (-want +got):\n%s", diff)
	}
	all := map[string]string{}
	for _, r := range want {
		all[r] = "too broad"
	}
	if c.Withhold(all); c.Template != nil || c.Instance != nil {
		t.Error("a policy with every role withheld still compiles objects")
	}
}
