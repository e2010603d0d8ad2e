package admission

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/manager"
)

var emptyVerbs = oriav1alpha1.ClusterRoleTemplate{Name: "broken", Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{}}}}

func rbacPolicy(mutate ...func(*oriav1alpha1.RBACPolicy)) *oriav1alpha1.RBACPolicy {
	p := &oriav1alpha1.RBACPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: oriav1alpha1.GroupVersion.String(), Kind: "RBACPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: "argocd", Access: oriav1alpha1.AccessView,
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "alice"}}, Namespaces: []string{"a"}},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func TestSpecErrors(t *testing.T) {
	bot := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "bot"}
	bogus := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Bogus"}}}
	suffix := "; oria could not apply it, so it is refused for every user, cluster admins included"
	withSubjects := func(tp *oriav1alpha1.ScopeTemplate, s ...rbacv1.Subject) *oriav1alpha1.ScopeTemplate {
		tp.Spec.BindingTemplate.Subjects = s
		return tp
	}
	for _, tc := range []struct {
		name string
		obj  client.Object
		want []string
	}{{
		name: "template: a ServiceAccount without a namespace is fine (the binding's namespace)",
		obj:  withSubjects(tmpl(oriav1alpha1.ClusterRoleTemplate{Name: "view"}, oriav1alpha1.ClusterRoleTemplate{Name: "mine", Rules: secretRules}), bot),
	}, {
		name: "template: an inline role with no verbs",
		obj:  withSubjects(tmpl(oriav1alpha1.ClusterRoleTemplate{Name: "view"}, emptyVerbs), bot),
		want: []string{`ScopeTemplate "t" is not valid (InvalidSpec): spec.clusterRoles[1].rules[0]: verbs must contain at least one value` + suffix},
	}, {
		name: "template: a gate's name, referenced or inline (issue 38, case 1: an empty gate is held by anyone)",
		obj: withSubjects(tmpl(oriav1alpha1.ClusterRoleTemplate{Name: "oria-window-grant-1a2b3c4d"},
			oriav1alpha1.ClusterRoleTemplate{GenerateName: "oria-window-", Rules: secretRules}), bot),
		want: []string{`ScopeTemplate "t" is not valid (InvalidSpec): ` +
			`spec.clusterRoles[0]: ClusterRole "oria-window-grant-1a2b3c4d" is a gate's name (oria-window-...): oria fills and empties a time-bound grant's gate itself, so no template may name one; name the roles it stands for; ` +
			`spec.clusterRoles[1]: ClusterRole "oria-window-d27db28d50" is a gate's name (oria-window-...): oria fills and empties a time-bound grant's gate itself, so no template may name one; name the roles it stands for` + suffix},
	}, {
		name: "template: a subject of no known kind",
		obj:  withSubjects(tmpl(oriav1alpha1.ClusterRoleTemplate{Name: "view"}), rbacv1.Subject{Kind: "Robot", Name: "r2"}),
		want: []string{`ScopeTemplate "t" is not valid (InvalidSubject): spec.bindingTemplate.subjects[0]: kind "Robot" is not one of User, Group, ServiceAccount` + suffix},
	}, {
		name: "instance: valid",
		obj:  instance("i"),
	}, {
		name: "instance: a selector that does not parse, and restart labels that are not labels",
		obj: instance("i", func(si *oriav1alpha1.ScopeInstance) {
			si.Spec.Namespaces, si.Spec.NamespaceSelector = nil, bogus
			si.Spec.Publication = &oriav1alpha1.Publication{ConfigMap: oriav1alpha1.ConfigMapKeyReference{Namespace: "ops", Name: "watch"},
				RestartLabels: map[string]string{"app": "not a label value"}}
		}),
		want: []string{
			`ScopeInstance "i" is not valid (InvalidSelector): spec.namespaceSelector: "Bogus" is not a valid label selector operator` + suffix,
			`ScopeInstance "i" is not valid (InvalidSpec): spec.publication.restartLabels: value "not a label value" of "app": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')` + suffix,
		},
	}, {
		name: "policy: valid",
		obj:  rbacPolicy(),
	}, {
		name: "policy: a ServiceAccount without a namespace, and a selector that does not parse",
		obj: rbacPolicy(func(p *oriav1alpha1.RBACPolicy) {
			p.Spec.Subjects = append(p.Spec.Subjects, bot)
			p.Spec.Namespaces, p.Spec.NamespaceSelector = nil, bogus
		}),
		want: []string{
			`RBACPolicy "p" is not valid (InvalidSubject): spec.subjects[1]: ServiceAccount "bot" needs a namespace: an RBACPolicy names each ServiceAccount once for every namespace it targets` + suffix,
			`RBACPolicy "p" is not valid (InvalidSelector): spec.namespaceSelector: "Bogus" is not a valid label selector operator` + suffix,
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, SpecErrors(tc.obj)); diff != "" {
				t.Errorf("SpecErrors (-want +got):\n%s", diff)
			}
		})
	}
}

// adminGuard returns a guard for which every SubjectAccessReview says yes
// (a cluster admin), counting them.
func adminGuard(t *testing.T) (*Guard, *int) {
	t.Helper()
	scheme, err := manager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	reviews := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			if sar, ok := obj.(*authorizationv1.SubjectAccessReview); ok {
				reviews++
				sar.Status.Allowed = true
			}
			return nil
		},
	}).Build()
	return testGuard(t, c, scheme), &reviews
}

// TestGuardRefusesSpecErrorsForEveryone: a create or a spec change into a
// spec error is refused for an admin too, naming the field, without a
// review; the same write, valid, is admitted.
func TestGuardRefusesSpecErrorsForEveryone(t *testing.T) {
	adminsTemplate := tmpl(oriav1alpha1.ClusterRoleTemplate{Name: "view"})
	withEmptyVerbs := tmpl(oriav1alpha1.ClusterRoleTemplate{Name: "view"}, emptyVerbs)
	adminsPolicy := rbacPolicy()
	namespaceless := rbacPolicy(func(p *oriav1alpha1.RBACPolicy) {
		p.Spec.Subjects = append(p.Spec.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "bot"})
	})
	badSelector := instance("i", func(si *oriav1alpha1.ScopeInstance) {
		si.Spec.Namespaces = nil
		si.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}
	})
	for _, tc := range []struct {
		name     string
		op       admissionv1.Operation
		obj, old client.Object
		want     string
	}{
		{"a template created with an empty verbs list", admissionv1.Create, withEmptyVerbs, nil, `spec.clusterRoles[1].rules[0]: verbs must contain at least one value`},
		{"an inline role with empty verbs added to a template", admissionv1.Update, withEmptyVerbs, adminsTemplate, `spec.clusterRoles[1].rules[0]: verbs must contain at least one value`},
		{"a ServiceAccount without a namespace added to a policy", admissionv1.Update, namespaceless, adminsPolicy, `spec.subjects[1]: ServiceAccount "bot" needs a namespace`},
		{"an instance with a selector that does not parse", admissionv1.Create, badSelector, nil, `spec.namespaceSelector: `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, reviews := adminGuard(t)
			resp := g.Handle(context.Background(), request(t, tc.op, tc.obj, tc.old))
			if resp.Allowed || !strings.Contains(resp.Result.Message, tc.want) || !strings.Contains(resp.Result.Message, "refused for every user, cluster admins included") {
				t.Errorf("allowed=%v, message %q", resp.Allowed, resp.Result.Message)
			}
			if *reviews != 0 {
				t.Errorf("%d reviews, want none: a spec error needs no review", *reviews)
			}
			// The same write without the error is admitted (the admin may
			// do everything).
			valid := request(t, tc.op, fix(tc.obj), tc.old)
			if resp := g.Handle(context.Background(), valid); !resp.Allowed {
				t.Errorf("the valid write is refused: %v", resp.Result)
			}
		})
	}
}

// fix returns obj without the spec errors the test puts in.
func fix(obj client.Object) client.Object {
	switch o := obj.DeepCopyObject().(type) {
	case *oriav1alpha1.ScopeTemplate:
		o.Spec.ClusterRoles = o.Spec.ClusterRoles[:1]
		return o
	case *oriav1alpha1.RBACPolicy:
		o.Spec.Subjects = o.Spec.Subjects[:1]
		return o
	case *oriav1alpha1.ScopeInstance:
		o.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
		return o
	}
	return obj
}

// TestGuardAdmitsMetadataOfInvalidObjects: an object stored with a spec
// error (before the guard checked for them) still takes updates that leave
// its spec alone, such as a finalizer's removal, without a review.
func TestGuardAdmitsMetadataOfInvalidObjects(t *testing.T) {
	g, calls := guard(t, errors.New("the API server must not be asked"))
	broken := tmpl(oriav1alpha1.ClusterRoleTemplate{Name: "view"}, emptyVerbs)
	broken.Finalizers = []string{"example.com/keep"}
	released := broken.DeepCopy()
	released.Finalizers = nil
	relabelled := rbacPolicy(func(p *oriav1alpha1.RBACPolicy) {
		p.Spec.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "bot"}}
	})
	old := relabelled.DeepCopy()
	relabelled.Labels = map[string]string{"team": "b"}
	for name, req := range map[string]struct{ obj, old client.Object }{
		"a finalizer removed from an invalid template": {released, broken},
		"a label changed on an invalid policy":         {relabelled, old},
	} {
		t.Run(name, func(t *testing.T) {
			if resp := g.Handle(context.Background(), request(t, admissionv1.Update, req.obj, req.old)); !resp.Allowed {
				t.Errorf("refused: %v", resp.Result)
			}
		})
	}
	if *calls != 0 {
		t.Errorf("%d calls to the API server, want none", *calls)
	}
}
