package admission

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
	"github.com/operator-framework/oria/internal/manager"
)

var secretRules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}

func tmpl(roles ...oriav1alpha1.ClusterRoleTemplate) *oriav1alpha1.ScopeTemplate {
	return &oriav1alpha1.ScopeTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: oriav1alpha1.GroupVersion.String(), Kind: "ScopeTemplate"},
		ObjectMeta: metav1.ObjectMeta{Name: "t"},
		Spec:       oriav1alpha1.ScopeTemplateSpec{ClusterRoles: roles},
	}
}

func TestChangedInlineRoles(t *testing.T) {
	podRules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}
	old := tmpl(oriav1alpha1.ClusterRoleTemplate{Name: "same", Rules: podRules},
		oriav1alpha1.ClusterRoleTemplate{Name: "grows", Rules: podRules},
		oriav1alpha1.ClusterRoleTemplate{Name: "view"})
	updated := tmpl(oriav1alpha1.ClusterRoleTemplate{Name: "same", Rules: podRules},
		oriav1alpha1.ClusterRoleTemplate{Name: "grows", Rules: append(podRules, secretRules...)},
		oriav1alpha1.ClusterRoleTemplate{Name: "new", Rules: secretRules},
		oriav1alpha1.ClusterRoleTemplate{Name: "view"})
	for _, tc := range []struct {
		name     string
		old, new *oriav1alpha1.ScopeTemplate
		want     map[string][]rbacv1.PolicyRule
	}{
		{"create: every inline role", nil, old, map[string][]rbacv1.PolicyRule{"same": podRules, "grows": podRules}},
		{"update: new and changed inline roles", old, updated, map[string][]rbacv1.PolicyRule{"grows": append(podRules, secretRules...), "new": secretRules}},
		{"update: nothing changed", old, old, map[string][]rbacv1.PolicyRule{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ChangedInlineRoles(tc.old, tc.new)); diff != "" {
				t.Errorf("ChangedInlineRoles (-want +got):\n%s", diff)
			}
		})
	}
}

// request builds an admission request for obj (and old, on update).
func request(t *testing.T, op admissionv1.Operation, obj, old runtime.Object) admission.Request {
	t.Helper()
	raw := func(o runtime.Object) runtime.RawExtension {
		if o == nil {
			return runtime.RawExtension{}
		}
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: op,
		Kind:      metav1.GroupVersionKind{Group: oriav1alpha1.GroupVersion.Group, Version: "v1alpha1", Kind: obj.GetObjectKind().GroupVersionKind().Kind},
		Name:      "t",
		UserInfo:  authenticationv1.UserInfo{Username: "bob"},
		Object:    raw(obj),
		OldObject: raw(old),
	}}
}

// guard returns a guard whose client fails every call with err, counting
// the calls.
func guard(t *testing.T, err error) (*Guard, *int) {
	t.Helper()
	scheme, serr := manager.Scheme()
	if serr != nil {
		t.Fatal(serr)
	}
	calls := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			calls++
			return err
		},
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			calls++
			return err
		},
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			calls++
			return err
		},
	}).Build()
	return testGuard(t, c, scheme), &calls
}

func TestHandleAdmitsWithoutChecking(t *testing.T) {
	g, calls := guard(t, errors.New("the API server must not be asked"))
	labelled := tmpl(oriav1alpha1.ClusterRoleTemplate{Name: "mine", Rules: secretRules})
	labelled.Labels = map[string]string{"team": "a"}
	for name, req := range map[string]admission.Request{
		"update of metadata only": request(t, admissionv1.Update, labelled, tmpl(oriav1alpha1.ClusterRoleTemplate{Name: "mine", Rules: secretRules})),
		"delete":                  request(t, admissionv1.Delete, labelled, nil),
		"status": func() admission.Request {
			r := request(t, admissionv1.Update, labelled, tmpl())
			r.SubResource = "status"
			return r
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			if resp := g.Handle(context.Background(), req); !resp.Allowed {
				t.Errorf("refused: %v", resp.Result)
			}
		})
	}
	if *calls != 0 {
		t.Errorf("%d calls to the API server, want none", *calls)
	}
}

// TestHandleFailsClosed: when the checks cannot be made, the request is
// refused and the message says why.
func TestHandleFailsClosed(t *testing.T) {
	g, _ := guard(t, errors.New("connection refused"))
	inst := &oriav1alpha1.ScopeInstance{
		TypeMeta:   metav1.TypeMeta{APIVersion: oriav1alpha1.GroupVersion.String(), Kind: "ScopeInstance"},
		ObjectMeta: metav1.ObjectMeta{Name: "i"},
		Spec:       oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: "t"},
	}
	policy := &oriav1alpha1.RBACPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: oriav1alpha1.GroupVersion.String(), Kind: "RBACPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec:       oriav1alpha1.RBACPolicySpec{ExtensionName: "argocd", Access: oriav1alpha1.AccessView},
	}
	for _, obj := range []runtime.Object{tmpl(oriav1alpha1.ClusterRoleTemplate{Name: "view"}), inst, policy} {
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		t.Run(kind, func(t *testing.T) {
			resp := g.Handle(context.Background(), request(t, admissionv1.Create, obj, nil))
			if resp.Allowed {
				t.Fatal("admitted although nothing could be checked")
			}
			if resp.Result.Code != http.StatusInternalServerError {
				t.Errorf("code %d, want 500", resp.Result.Code)
			}
			for _, want := range []string{`oria: could not check that user "bob" may grant what this ` + kind + ` grants, so it is refused`, "connection refused"} {
				if !strings.Contains(resp.Result.Message, want) {
					t.Errorf("message %q does not contain %q", resp.Result.Message, want)
				}
			}
		})
	}
}

func TestHandleRefusesUndecodable(t *testing.T) {
	g, _ := guard(t, nil)
	req := request(t, admissionv1.Create, tmpl(), nil)
	req.Object = runtime.RawExtension{Raw: []byte(`{"spec": 3}`)}
	if resp := g.Handle(context.Background(), req); resp.Allowed {
		t.Error("an object that cannot be decoded was admitted")
	}
}

// TestHandleRecord: a record naming someone other than the requester is
// refused for everyone, without asking the API server (no latency added);
// the requester's own revocation record is admitted the same way.
func TestHandleRecord(t *testing.T) {
	g, calls := guard(t, errors.New("the API server must not be asked"))
	now := time.Now().UTC().Format(time.RFC3339)
	old := tmpl()
	old.Annotations = map[string]string{oriav1alpha1.AnnotationGrantedBy: "alice"}
	forged := old.DeepCopy()
	forged.Annotations[oriav1alpha1.AnnotationGrantedBy] = "bob"
	resp := g.Handle(context.Background(), request(t, admissionv1.Update, forged, old))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "is written when the object is created, and never changed") {
		t.Errorf("a changed granted-by: allowed %v, %v", resp.Allowed, resp.Result)
	}
	created := tmpl()
	created.Annotations = map[string]string{oriav1alpha1.AnnotationGrantedBy: "alice", oriav1alpha1.AnnotationGrantedAt: now}
	resp = g.Handle(context.Background(), request(t, admissionv1.Create, created, nil))
	if resp.Allowed || !strings.Contains(resp.Result.Message, `says "alice", but the request is made by "bob"`) {
		t.Errorf("a create in alice's name by bob: allowed %v, %v", resp.Allowed, resp.Result)
	}
	revoked := old.DeepCopy()
	revoked.Annotations[oriav1alpha1.AnnotationRevokedBy] = "bob"
	revoked.Annotations[oriav1alpha1.AnnotationRevokedAt] = now
	if resp := g.Handle(context.Background(), request(t, admissionv1.Update, revoked, old)); !resp.Allowed {
		t.Errorf("bob's own revocation record: refused: %v", resp.Result)
	}
	if *calls != 0 {
		t.Errorf("%d calls to the API server, want none", *calls)
	}
}
