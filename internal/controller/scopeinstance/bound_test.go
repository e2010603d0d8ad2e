package scopeinstance

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/publish"
	"github.com/operator-framework/oria/internal/reconciler"
	"github.com/operator-framework/oria/internal/scheme"
)

// TestPublishedIsBound: the published list and status.boundNamespaces are
// the same list, also when a stale binding in a bound namespace fails to
// go (the namespace's intended bindings are in place all the same).
func TestPublishedIsBound(t *testing.T) {
	s, err := scheme.New()
	require.NoError(t, err)
	nss := []client.Object{}
	for _, n := range []string{"op", "a", "b"} {
		nss = append(nss, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "si", UID: "si-uid", Generation: 1},
		Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: "t", Namespaces: []string{"a", "b"}, Publication: &oriav1alpha1.Publication{
			ConfigMap: oriav1alpha1.ConfigMapKeyReference{Namespace: "op", Name: "scope"}, IncludeConfigMapNamespace: ptr.To(false)}}}
	tmpl := &oriav1alpha1.ScopeTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}}
	// A binding of a role the template no longer has, in namespace a.
	stale := binding.RoleBindings(si, tmpl.Name, []string{"old"}, nil, []string{"a"})[0]
	stale.UID = "stale-uid"
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(append(nss, stale)...).WithInterceptorFuncs(interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if _, ok := obj.(*rbacv1.RoleBinding); ok {
				return errors.New("the API server is unavailable")
			}
			return c.Delete(ctx, obj, opts...)
		},
	}).Build()
	r := newReconciler(Deps{Base: reconciler.Base{Client: c, APIReader: c, Recorder: &events.FakeRecorder{}, Engine: engine.New(engine.Unobserved), Memo: engine.NewMemo()}}, Options{})
	p := &plan{template: tmpl, roles: []string{"view"}, targets: binding.Targets{Namespaces: []string{"a", "b"}}, want: binding.Set{RoleBindings: binding.RoleBindings(si, tmpl.Name, []string{"view"}, nil, []string{"a", "b"})}, existing: binding.Set{RoleBindings: []*rbacv1.RoleBinding{stale}}, revoke: binding.Set{RoleBindings: []*rbacv1.RoleBinding{stale}}}

	res, err := r.Write(context.Background(), si, p)
	require.Error(t, err)
	require.Len(t, res.summary.Errors, 1, "the stale binding's delete failed")
	st := computeStatus(si, p, res, err)

	cm := &corev1.ConfigMap{}
	require.NoError(t, c.Get(context.Background(), types.NamespacedName{Namespace: "op", Name: "scope"}, cm))
	if d := cmp.Diff(publish.Value(st.BoundNamespaces), cm.Data[oriav1alpha1.DefaultPublicationKey]); d != "" {
		t.Errorf("published list differs from status.boundNamespaces (-status +published):\n%s", d)
	}
	if d := cmp.Diff([]string{"a", "b"}, st.BoundNamespaces); d != "" {
		t.Errorf("bound namespaces (-want +got):\n%s", d)
	}
	require.NotNil(t, st.Publication)
	require.Equal(t, publish.Hash(publish.Value(st.BoundNamespaces)), st.Publication.Hash)
}
