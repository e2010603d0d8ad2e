package admission

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/eligibility"
	"github.com/operator-framework/oria/internal/manager"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/policy"
)

// fuzzKinds are the kinds the guard decodes, by the fuzz input's kind byte.
var fuzzKinds = []string{"ScopeTemplate", "ScopeInstance", "RBACPolicy", "AccessRequest"}

// addGuardSeeds adds, for each kind, the objects of the guard's tests:
// creates, and updates of an old object into a new one.
func addGuardSeeds(f *testing.F) {
	marshal := func(o runtime.Object) []byte {
		if o == nil {
			return nil
		}
		b, err := json.Marshal(o)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	add := func(kind int, obj, old runtime.Object) {
		f.Add(uint8(kind), marshal(obj), marshal(old))
	}
	podRules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}
	owned := tmpl(oriav1alpha1.ClusterRoleTemplate{Name: "mine", Rules: secretRules})
	owned.Labels = map[string]string{oriav1alpha1.LabelManaged: oriav1alpha1.ManagedValue}
	add(0, tmpl(oriav1alpha1.ClusterRoleTemplate{Name: "view"}), nil)
	add(0, tmpl(oriav1alpha1.ClusterRoleTemplate{Name: "grows", Rules: append(podRules, secretRules...)}, oriav1alpha1.ClusterRoleTemplate{GenerateName: "gen-", Rules: podRules}),
		tmpl(oriav1alpha1.ClusterRoleTemplate{Name: "grows", Rules: podRules}))
	add(0, tmpl(oriav1alpha1.ClusterRoleTemplate{Name: "view"}, emptyVerbs), tmpl(oriav1alpha1.ClusterRoleTemplate{Name: "view"}))
	add(0, owned, tmpl(oriav1alpha1.ClusterRoleTemplate{Name: "mine", Rules: secretRules}))
	add(1, instance("i"), nil)
	add(1, instance("i", func(si *oriav1alpha1.ScopeInstance) {
		si.Spec.Namespaces, si.Spec.NamespaceSelector = nil, &metav1.LabelSelector{}
		si.Spec.ServiceAccount = &oriav1alpha1.ServiceAccountReference{Namespace: "ops", Name: "ceiling"}
		si.Spec.Publication = &oriav1alpha1.Publication{ConfigMap: oriav1alpha1.ConfigMapKeyReference{Namespace: "ops", Name: "watch"}, RestartLabels: map[string]string{"app": "op"}}
	}), instance("i"))
	add(1, instance("rbacpolicy-foo", func(si *oriav1alpha1.ScopeInstance) {
		si.OwnerReferences = []metav1.OwnerReference{ownership.Ref(ownership.KindRBACPolicy, "foo", "uid")}
		si.Labels = policy.PolicyLabels("foo")
		si.Finalizers = []string{"example.com/keep"}
	}), instance("rbacpolicy-foo"))
	add(2, rbacPolicy(), nil)
	add(2, rbacPolicy(func(p *oriav1alpha1.RBACPolicy) {
		p.Spec.Subjects = append(p.Spec.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "bot"})
		p.Spec.APIs = []oriav1alpha1.APIRef{{Group: "argoproj.io", Resource: "applications"}}
		p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "mallory", Operation: metav1.ManagedFieldsOperationApply,
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:namespaces":{}}}`)}}}
	}), rbacPolicy())
	request := func(mutate ...func(*oriav1alpha1.AccessRequest)) *oriav1alpha1.AccessRequest {
		r := &oriav1alpha1.AccessRequest{
			TypeMeta:   metav1.TypeMeta{APIVersion: oriav1alpha1.GroupVersion.String(), Kind: "AccessRequest"},
			ObjectMeta: metav1.ObjectMeta{Name: "fuzz"},
			Spec: oriav1alpha1.AccessRequestSpec{PolicyName: "p", Requester: "bob", Namespaces: []string{"a"},
				Duration: metav1.Duration{Duration: time.Hour}, Reason: "on call"},
		}
		for _, m := range mutate {
			m(r)
		}
		return r
	}
	add(3, request(), nil)
	add(3, request(func(r *oriav1alpha1.AccessRequest) {
		r.Annotations = map[string]string{oriav1alpha1.AnnotationApprovedBy: "bob", oriav1alpha1.AnnotationApprovedAt: "2026-11-28T20:00:00Z"}
	}), request())
	add(3, request(func(r *oriav1alpha1.AccessRequest) {
		r.Spec.EligibleAs = &rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "oncall"}
		r.Spec.Duration.Duration = -time.Second
	}), nil)
	add(1, nil, nil)
	f.Add(uint8(1), []byte(`{"spec":{"scopeTemplateName":"t","namespaceSelector":{"team":5}}}`), []byte(`{"spec": 3}`))
}

// eligiblePolicy is a policy whose subjects bob and the group oncall are
// eligible, approved by alice.
func eligiblePolicy() *oriav1alpha1.RBACPolicy {
	return rbacPolicy(func(p *oriav1alpha1.RBACPolicy) {
		p.Spec.Subjects = append(p.Spec.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, Name: "bob"}, rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "oncall"})
		p.Spec.Eligibility = &oriav1alpha1.Eligibility{MaxDuration: metav1.Duration{Duration: 4 * time.Hour},
			Approvers: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "alice"}}, RequireReason: true}
	})
}

// FuzzGuardDecode feeds any bytes to the guard as the object (and the old
// object) of a create or an update of each of oria's kinds. Decoding,
// classifying the change and finding spec errors never panic, and the
// guard fails closed: with an API server that answers nothing, it admits a
// request exactly when the change needs no check, and never one it could
// not decode.
func FuzzGuardDecode(f *testing.F) {
	addGuardSeeds(f)
	scheme, err := manager.Scheme()
	if err != nil {
		f.Fatal(err)
	}
	unavailable := errors.New("unavailable")
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			return unavailable
		},
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return unavailable
		},
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return unavailable
		},
	}).Build()
	g := testGuard(f, c, scheme)
	f.Fuzz(func(t *testing.T, kind uint8, obj, old []byte) {
		op := admissionv1.Create
		if old != nil {
			op = admissionv1.Update
		}
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: op,
			Kind:      metav1.GroupVersionKind{Group: oriav1alpha1.GroupVersion.Group, Version: "v1alpha1", Kind: fuzzKinds[int(kind)%len(fuzzKinds)]},
			Name:      "fuzz",
			UserInfo:  authenticationv1.UserInfo{Username: "bob"},
			Object:    runtime.RawExtension{Raw: obj},
			OldObject: runtime.RawExtension{Raw: old},
		}}
		before, after, err := g.decode(req)
		resp := g.Handle(context.Background(), req)
		if err != nil {
			if resp.Allowed {
				t.Fatalf("admitted what does not decode: %v", err)
			}
			return
		}
		if r, ok := after.(*oriav1alpha1.AccessRequest); ok {
			// Every create and update of a request is judged against its
			// policy as the API server has it: none can be read, so none
			// is admitted. The pure rules never panic, whatever the policy.
			if resp.Allowed {
				t.Fatalf("admitted an AccessRequest without reading its policy")
			}
			u := eligibility.User{Name: "bob", Groups: []string{"oncall"}}
			for _, p := range []*oriav1alpha1.RBACPolicy{nil, eligiblePolicy()} {
				_ = eligibility.AdmitCreate(p, r, u)
				if before != nil {
					_ = eligibility.AdmitUpdate(p, before.(*oriav1alpha1.AccessRequest), r, u, false, time.Now())
				}
			}
			return
		}
		ch := classify(before, after)
		problems := SpecErrors(after)
		if ch.spec && len(problems) > 0 && resp.Allowed {
			t.Errorf("admitted a spec error: %v", problems)
		}
		if resp.Allowed == ch.needsCheck() {
			t.Errorf("allowed %v, but the change needs a check: %v (%+v)", resp.Allowed, ch.needsCheck(), ch)
		}
		// What the guard would go on to check: the same pure functions.
		switch o := after.(type) {
		case *oriav1alpha1.ScopeTemplate:
			var prev *oriav1alpha1.ScopeTemplate
			if before != nil {
				prev = before.(*oriav1alpha1.ScopeTemplate)
			}
			_ = ChangedInlineRoles(prev, o)
			if prev != nil {
				_ = binding.Widened(prev, o)
			}
		case *oriav1alpha1.ScopeInstance:
			_ = binding.InstanceGrants(o.Spec, []string{"r", ""})
			_ = PublicationPermissions(o.Spec.Publication)
		case *oriav1alpha1.RBACPolicy:
			_ = policy.Compile(o, []string{"applications.argoproj.io"})
		}
	})
}
