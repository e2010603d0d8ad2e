package cli

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
)

// impersonator hands out one client for every ServiceAccount.
type impersonator struct{ c client.Client }

func (i impersonator) For(string, string) (client.Client, error) { return i.c, nil }

// TestCheckCeilings: the error paths of the ceiling's dry runs (the real
// answers: TestKubectlOriaPlanCeiling). A refusal marks the change REFUSED
// with the reason; a role that does not exist yet leaves it unknown (a
// note, counted); a ServiceAccount the requester may not impersonate is not
// asked; an instance without a ceiling asks nothing.
func TestCheckCeilings(t *testing.T) {
	st, _, si := planState()
	st.RoleBindings = nil
	if _, checks := plan(st, []client.Object{si}, nil); len(checks) != 0 {
		t.Fatalf("an instance without a ceiling asks %d dry runs", len(checks))
	}
	ceilinged := si.DeepCopy()
	ceilinged.Spec.ServiceAccount = &oriav1alpha1.ServiceAccountReference{Namespace: "ops", Name: "deployer"}
	report, checks := plan(st, []client.Object{ceilinged}, nil)
	if len(checks) != 4 {
		t.Fatalf("4 bindings to create, %d dry runs", len(checks))
	}
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	pods, view := binding.BindingName("ops", "ops-pods"), binding.BindingName("ops", "view")
	as := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			switch {
			case obj.GetNamespace() == "a" && obj.GetName() == pods:
				return apierrors.NewForbidden(schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"}, obj.GetName(),
					errors.New("attempting to grant RBAC permissions not currently held"))
			case obj.GetNamespace() == "b" && obj.GetName() == view:
				return apierrors.NewNotFound(schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}, "view")
			}
			return nil
		}}).Build()
	requester := func(allowed bool) client.Client {
		return fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
			Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
				obj.(*authorizationv1.SelfSubjectAccessReview).Status.Allowed = allowed
				return nil
			}}).Build()
	}

	got := report
	got.Changes = append([]Change(nil), report.Changes...)
	checkCeilings(context.Background(), requester(true), impersonator{as}, &got, checks)
	var refused []string
	for _, c := range got.Changes {
		if c.Refused {
			refused = append(refused, c.Namespace+"/"+c.Name)
		}
	}
	if d := cmp.Diff([]string{"a/" + pods}, refused); d != "" {
		t.Errorf("refused (-want +got):\n%s", d)
	}
	notes := strings.Join(got.Notes, "\n")
	for _, s := range []string{
		"ScopeInstance ops: RoleBinding a/" + pods + " is written as ServiceAccount ops/deployer (spec.serviceAccount), which may not create it: ",
		"attempting to grant RBAC permissions not currently held",
		"ScopeInstance ops: whether ServiceAccount ops/deployer (spec.serviceAccount) may create RoleBinding b/" + view + " is unknown until ClusterRole view exists",
	} {
		if !strings.Contains(notes, s) {
			t.Errorf("notes have no %q:\n%s", s, notes)
		}
	}
	if !strings.Contains(PlanHeader(&got), "3 to create, 0 to update, 0 to delete, 0 unchanged; 1 REFUSED (not written)") {
		t.Errorf("PlanHeader:\n%s", PlanHeader(&got))
	}

	// Not allowed to impersonate: nothing is asked, a note says so.
	got = report
	got.Changes = append([]Change(nil), report.Changes...)
	checkCeilings(context.Background(), requester(false), impersonator{as}, &got, checks)
	if n := refusedChanges(got.Changes); n != 0 {
		t.Errorf("%d refused without asking", n)
	}
	if want := "4 bindings are written as ServiceAccount ops/deployer (spec.serviceAccount), which you may not impersonate: whether it may write them is unknown"; !strings.Contains(strings.Join(got.Notes, "\n"), want) {
		t.Errorf("notes have no %q: %q", want, got.Notes)
	}
}
