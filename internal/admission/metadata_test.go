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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/manager"
	"github.com/operator-framework/oria/internal/ownership"
)

// restrictedGuard returns a guard for which every SubjectAccessReview says
// no (a restricted user), and which finds the RBACPolicies in policies.
func restrictedGuard(t *testing.T, policies ...*oriav1alpha1.RBACPolicy) *Guard {
	t.Helper()
	scheme, err := manager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			if sar, ok := obj.(*authorizationv1.SubjectAccessReview); ok {
				sar.Status.Allowed = false
			}
			return nil
		},
		Get: func(_ context.Context, _ client.WithWatch, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
			for _, p := range policies {
				if out, ok := obj.(*oriav1alpha1.RBACPolicy); ok && p.Name == key.Name {
					p.DeepCopyInto(out)
					return nil
				}
			}
			return apierrors.NewNotFound(schema.GroupResource{Resource: "unknown"}, key.Name)
		},
	}).Build()
	return testGuard(t, c, scheme)
}

func instance(name string, mutate ...func(*oriav1alpha1.ScopeInstance)) *oriav1alpha1.ScopeInstance {
	si := &oriav1alpha1.ScopeInstance{
		TypeMeta:   metav1.TypeMeta{APIVersion: oriav1alpha1.GroupVersion.String(), Kind: "ScopeInstance"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"team": "a"}},
		Spec:       oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: "t", Namespaces: []string{"a"}},
	}
	for _, m := range mutate {
		m(si)
	}
	return si
}

func compiled(si *oriav1alpha1.ScopeInstance) {
	si.Labels = ownership.PolicyLabels("foo")
	ref := ownership.Ref(ownership.KindRBACPolicy, "foo", "uid-foo")
	si.OwnerReferences = []metav1.OwnerReference{ref}
}

// TestGuardMetadata: what a restricted user may not do around the spec
// check, and what the garbage collector still may.
func TestGuardMetadata(t *testing.T) {
	live := &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: "foo", UID: "uid-foo"}}
	ssa := func(manager, fields string) func(*oriav1alpha1.ScopeInstance) {
		return func(si *oriav1alpha1.ScopeInstance) {
			si.ManagedFields = append(si.ManagedFields, metav1.ManagedFieldsEntry{
				Manager: manager, Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
				FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}})
		}
	}
	const nsFields = `{"f:spec":{"f:namespaces":{},"f:scopeTemplateName":{}}}`
	for _, tc := range []struct {
		name     string
		old, new *oriav1alpha1.ScopeInstance
		policies []*oriav1alpha1.RBACPolicy
		// want is "" when admitted, else a part of the refusal.
		want string
	}{{
		name: "an unrelated label is admitted unchecked",
		old:  instance("i"), new: instance("i", func(si *oriav1alpha1.ScopeInstance) { si.Labels["team"] = "b" }),
	}, {
		name: "forging a controller reference to a policy",
		old:  instance("rbacpolicy-foo"),
		new: instance("rbacpolicy-foo", func(si *oriav1alpha1.ScopeInstance) {
			si.OwnerReferences = []metav1.OwnerReference{ownership.Ref(ownership.KindRBACPolicy, "foo", "uid-foo")}
		}),
		want: `is compiled from RBACPolicy "foo"`,
	}, {
		name: "setting a policy label",
		old:  instance("i"), new: instance("i", func(si *oriav1alpha1.ScopeInstance) { si.Labels[oriav1alpha1.LabelScopeTemplate] = "x" }),
		want: `it sets label oria.operatorframework.io/scope-template="x"`,
	}, {
		name: "adding a finalizer",
		old:  instance("i"), new: instance("i", func(si *oriav1alpha1.ScopeInstance) { si.Finalizers = []string{"example.com/keep"} }),
		want: `it adds finalizer "example.com/keep"`,
	}, {
		name: "retargeting a compiled instance",
		old:  instance("rbacpolicy-foo", compiled),
		new: instance("rbacpolicy-foo", compiled, func(si *oriav1alpha1.ScopeInstance) {
			si.Spec.NamespaceSelector = &metav1.LabelSelector{}
		}),
		want: `change the RBACPolicy instead`,
	}, {
		name: "co-owning a compiled instance's fields (server-side apply, same spec)",
		old:  instance("rbacpolicy-foo", compiled), new: instance("rbacpolicy-foo", compiled, ssa("mallory", nsFields)),
		want: `is compiled from RBACPolicy "foo"`,
	}, {
		name: "dropping the reference to a live policy",
		old:  instance("rbacpolicy-foo", compiled), new: instance("rbacpolicy-foo", compiled, func(si *oriav1alpha1.ScopeInstance) { si.OwnerReferences = nil }),
		policies: []*oriav1alpha1.RBACPolicy{live},
		want:     `is compiled from RBACPolicy "foo"`,
	}, {
		name: "the garbage collector drops the reference to a deleted policy",
		old:  instance("rbacpolicy-foo", compiled), new: instance("rbacpolicy-foo", compiled, func(si *oriav1alpha1.ScopeInstance) { si.OwnerReferences = nil }),
	}, {
		name: "co-owning an admin's instance is checked as writing its spec",
		old:  instance("i"), new: instance("i", ssa("mallory", nsFields)),
		want: `may not bind the roles of ScopeTemplate "t", which does not exist yet`,
	}, {
		name: "the same owners in another order, timestamps aside, are no change",
		old:  instance("i", ssa("admin", nsFields)),
		new: instance("i", ssa("admin", `{"f:spec":{"f:scopeTemplateName":{},"f:namespaces":{}}}`), func(si *oriav1alpha1.ScopeInstance) {
			si.ManagedFields[0].Time = ptr.To(metav1.Now())
		}),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := restrictedGuard(t, tc.policies...)
			resp := g.Handle(context.Background(), request(t, admissionv1.Update, tc.new, tc.old))
			if tc.want == "" {
				if !resp.Allowed {
					t.Fatalf("refused: %s", resp.Result.Message)
				}
				return
			}
			if resp.Allowed {
				t.Fatal("admitted")
			}
			if !strings.Contains(resp.Result.Message, tc.want) {
				t.Errorf("message %q does not contain %q", resp.Result.Message, tc.want)
			}
		})
	}
}

// TestGuardCreateClaimingOwnership: a restricted user may not create an
// object that claims to be compiled from a policy.
func TestGuardCreateClaimingOwnership(t *testing.T) {
	g := restrictedGuard(t)
	resp := g.Handle(context.Background(), request(t, admissionv1.Create, instance("rbacpolicy-foo", compiled), nil))
	if resp.Allowed || !strings.Contains(resp.Result.Message, `is compiled from RBACPolicy "foo"`) {
		t.Errorf("allowed=%v, message %q", resp.Allowed, resp.Result.Message)
	}
}

// TestGuardTemplateWidening: adding a subject to an existing template is
// checked cluster-wide for every role, adding a role for that role.
func TestGuardTemplateWidening(t *testing.T) {
	user := func(name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
	}
	old := tmpl(oriav1alpha1.ClusterRoleTemplate{Name: "admin"})
	old.Spec.BindingTemplate.Subjects = []rbacv1.Subject{user("operator")}
	withMallory := old.DeepCopy()
	withMallory.Spec.BindingTemplate.Subjects = append(withMallory.Spec.BindingTemplate.Subjects, user("mallory"))
	fewer := old.DeepCopy()
	fewer.Spec.BindingTemplate.Subjects = []rbacv1.Subject{user("operator"), user("other")}
	fewer.Spec.BindingTemplate.Subjects = fewer.Spec.BindingTemplate.Subjects[:1]
	for name, tc := range map[string]struct {
		new  *oriav1alpha1.ScopeTemplate
		want string
	}{
		"a new subject":     {withMallory, `may not bind ClusterRole "admin" cluster-wide`},
		"the same subjects": {fewer, ""},
		"a subject removed": {old, ""},
	} {
		t.Run(name, func(t *testing.T) {
			from := old
			if name == "a subject removed" {
				from = withMallory
			}
			resp := restrictedGuard(t).Handle(context.Background(), request(t, admissionv1.Update, tc.new, from))
			if tc.want == "" {
				if !resp.Allowed {
					t.Fatalf("refused: %s", resp.Result.Message)
				}
				return
			}
			if resp.Allowed || !strings.Contains(resp.Result.Message, tc.want) || !strings.Contains(resp.Result.Message, "checked cluster-wide") {
				t.Errorf("allowed=%v, message %q", resp.Allowed, resp.Result.Message)
			}
		})
	}
}

func TestSpecOwners(t *testing.T) {
	entries := []metav1.ManagedFieldsEntry{
		{Manager: "kubectl-label", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:team":{}}}}`)}},
		{Manager: "admin", Operation: metav1.ManagedFieldsOperationApply, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:namespaces":{}, "f:a":{}}}`)}},
		{Manager: "oria", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{}}`)}},
	}
	want := map[string]string{"admin/Apply": `{"f:a":{},"f:namespaces":{}}`}
	if diff := cmp.Diff(want, specOwners(entries)); diff != "" {
		t.Errorf("specOwners (-want +got):\n%s", diff)
	}
}

// TestGuardRefusesInvalidRestartLabels: restart labels that are not labels
// are refused for everyone (no review is needed to say so), naming the
// field.
func TestGuardRefusesInvalidRestartLabels(t *testing.T) {
	g, calls := guard(t, errors.New("the API server must not be asked"))
	si := instance("i", func(si *oriav1alpha1.ScopeInstance) {
		si.Spec.Publication = &oriav1alpha1.Publication{
			ConfigMap:     oriav1alpha1.ConfigMapKeyReference{Namespace: "ops", Name: "watch"},
			RestartLabels: map[string]string{"app": "not a label value"},
		}
	})
	resp := g.Handle(context.Background(), request(t, admissionv1.Create, si, nil))
	if resp.Allowed || !strings.Contains(resp.Result.Message, `spec.publication.restartLabels: value "not a label value" of "app"`) {
		t.Errorf("allowed=%v, message %q", resp.Allowed, resp.Result.Message)
	}
	if *calls != 0 {
		t.Errorf("%d calls to the API server, want none", *calls)
	}
}
