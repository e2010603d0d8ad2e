package scopeinstance

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
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

// TestReach: what a bindAll plan's writes reach, once for the publication
// and the status. A namespace is bound when every wanted binding there is
// in place; none is while the gate holds no rule, before the window or
// when its fill failed (the bindings grant nothing then); a grant is whole
// (what a cluster-wide one publishes) when nothing failed, was refused or
// waits.
func TestReach(t *testing.T) {
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "si", UID: "uid"}}
	rules := []rbacv1.PolicyRule{{Verbs: []string{"get"}, Resources: []string{"pods"}, APIGroups: []string{""}}}
	open := binding.GateRole(si, []binding.GateSource{{Name: "view", Rules: rules}}, true)
	closed := binding.GateRole(si, []binding.GateSource{{Name: "view", Rules: rules}}, false)
	rb := func(ns string, a engine.Action) engine.Outcome {
		return engine.Outcome{Namespace: ns, Name: "b", Action: a}
	}
	mixed := []engine.Outcome{rb("a", engine.Created), rb("b", engine.Failed), rb("c", engine.Skipped), rb("d", engine.Unchanged), rb("e", engine.Unchanged)}
	inAD := []engine.Outcome{rb("a", engine.Created), rb("d", engine.Unchanged)}
	ad := binding.Targets{Namespaces: []string{"a", "d"}}
	gateFailed := []engine.Outcome{{Name: open.Name, Action: engine.Failed, Err: errors.New("the API server is unavailable")}}
	for _, tc := range []struct {
		name    string
		p       *plan
		written []engine.Outcome
		gate    []engine.Outcome
		bound   []string
		whole   bool
	}{
		{name: "failed, skipped, refused and pending namespaces are not bound",
			p:       &plan{targets: binding.Targets{Namespaces: []string{"a", "b", "c", "d", "e"}}, refused: []engine.Outcome{rb("e", engine.Forbidden)}, unbound: map[string]bool{"d": true}},
			written: mixed, bound: []string{"a"}},
		{name: "every binding in place", p: &plan{targets: ad}, written: inAD, bound: []string{"a", "d"}, whole: true},
		{name: "the gate filled", p: &plan{targets: ad, gate: gatePlan{op: gateFill, want: open, cur: closed}},
			written: inAD, gate: []engine.Outcome{{Name: open.Name, Action: engine.Updated}}, bound: []string{"a", "d"}, whole: true},
		{name: "the gate's fill failed: nothing is granted", p: &plan{targets: ad, gate: gatePlan{op: gateFill, want: open, cur: closed}},
			written: inAD, gate: gateFailed},
		{name: "a narrowing that failed leaves the bindings granting", p: &plan{targets: ad, gate: gatePlan{op: gateNarrow, want: open, cur: open}},
			written: inAD, gate: gateFailed, bound: []string{"a", "d"}, whole: true},
		{name: "before the window", p: &plan{targets: ad, gate: gatePlan{op: gateNarrow, want: closed, cur: open}}, written: inAD},
		{name: "cluster-wide and whole", p: &plan{targets: binding.Targets{Cluster: true}}, written: []engine.Outcome{rb("", engine.Created)}, whole: true},
		{name: "cluster-wide, a role pending", p: &plan{targets: binding.Targets{Cluster: true}, pending: []string{"inline"}}, written: []engine.Outcome{rb("", engine.Created)}},
		{name: "cluster-wide, a binding refused", p: &plan{targets: binding.Targets{Cluster: true}, refused: []engine.Outcome{rb("", engine.Forbidden)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := engine.SetOutcome{{Kind: "RoleBinding", Namespaced: true, Outcomes: tc.written}}
			ensured, bound, whole := reach(tc.p, w, tc.gate)
			if d := cmp.Diff(tc.bound, bound); d != "" {
				t.Errorf("bound (-want +got):\n%s", d)
			}
			if whole != tc.whole {
				t.Errorf("whole = %v, want %v", whole, tc.whole)
			}
			if d := cmp.Diff(append(slices.Clip(tc.written), tc.p.refused...), ensured, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("ensured (-want +got):\n%s", d)
			}
		})
	}
}
