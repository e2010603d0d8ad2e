package cli

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
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
