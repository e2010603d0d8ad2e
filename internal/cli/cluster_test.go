package cli

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func TestRead(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	ext := extension("argocd", "Legacy", nil)
	owned := crd("argocd", "argoproj.io", "applications", "Application", apiextensionsv1.NamespaceScoped)
	other := apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "things.example.com"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&ext, &owned, &other,
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "rb"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "rb"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "crb"}},
	).Build()

	names := func(s *Snapshot) map[string][]string {
		out := map[string][]string{}
		add := func(kind string, o client.Object) { out[kind] = append(out[kind], o.GetNamespace()+"/"+o.GetName()) }
		for i := range s.Extensions {
			add("ClusterExtension", &s.Extensions[i])
		}
		for i := range s.CRDs {
			add("CRD", &s.CRDs[i])
		}
		for i := range s.RoleBindings {
			add("RoleBinding", &s.RoleBindings[i])
		}
		for i := range s.ClusterRoleBindings {
			add("ClusterRoleBinding", &s.ClusterRoleBindings[i])
		}
		return out
	}
	s, err := Read(context.Background(), c, What{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"ClusterExtension": {"/argocd"}, "CRD": {"/applications.argoproj.io"}}
	if d := cmp.Diff(want, names(s)); d != "" {
		t.Errorf("Read without bindings (-want +got):\n%s", d)
	}
	s, err = Read(context.Background(), c, What{Bindings: true, Namespace: "a"})
	if err != nil {
		t.Fatal(err)
	}
	want["RoleBinding"], want["ClusterRoleBinding"] = []string{"a/rb"}, []string{"/crb"}
	if d := cmp.Diff(want, names(s)); d != "" {
		t.Errorf("Read with bindings in a (-want +got):\n%s", d)
	}
}

// TestReadForbidden: a user who may not list ClusterExtensions, ClusterRoles
// or oria's kinds gets the named extension and its generated roles by name,
// and warnings for what is left out.
func TestReadForbidden(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	ext, other := extension("argocd", "Legacy", nil), extension("other", "Legacy", nil)
	owned := crd("argocd", "argoproj.io", "applications", "Application", apiextensionsv1.NamespaceScoped)
	view := clusterRole("applications.argoproj.io-view", nil)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&ext, &other, &owned, &view).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*apiextensionsv1.CustomResourceDefinitionList); ok {
				return c.List(ctx, list, opts...)
			}
			return apierrors.NewForbidden(schema.GroupResource{}, "", fmt.Errorf("no"))
		},
	}).Build()
	s, err := Read(context.Background(), c, What{Extensions: []string{"argocd", "missing"}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range s.Extensions {
		got = append(got, "ClusterExtension "+e.Name)
	}
	for _, r := range s.ClusterRoles {
		got = append(got, "ClusterRole "+r.Name)
	}
	got = append(got, s.Warnings...)
	want := []string{"ClusterExtension argocd", "ClusterRole applications.argoproj.io-view",
		"you may not list RBACPolicies: the report leaves them out",
		"you may not list ScopeTemplates: the report leaves them out",
		"you may not list ScopeInstances: the report leaves them out"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Read when lists are forbidden (-want +got):\n%s", d)
	}
	if _, err := Read(context.Background(), c, What{}); err == nil {
		t.Error("Read of every extension when they cannot be listed: no error")
	}
	if _, err := Read(context.Background(), c, What{Bindings: true, Extensions: []string{"argocd"}}); err == nil {
		t.Error("Read of bindings when ClusterRoles cannot be listed: no error")
	}
}
