package admission

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/authz"
	"github.com/operator-framework/oria/internal/manager"
)

var publication = &oriav1alpha1.Publication{
	ConfigMap:     oriav1alpha1.ConfigMapKeyReference{Namespace: "op", Name: "scope"},
	RestartLabels: map[string]string{"intent": "projected"},
}

func TestPublicationPermissions(t *testing.T) {
	cm := func(verb string) authz.Permission {
		return authz.Permission{Verb: verb, Resource: "configmaps", Name: "scope", Namespace: "op"}
	}
	apps := func(r string) authz.Permission {
		return authz.Permission{Verb: "patch", Group: "apps", Resource: r, Namespace: "op"}
	}
	noRestart := *publication
	noRestart.RestartLabels = nil
	for _, tc := range []struct {
		name string
		pub  *oriav1alpha1.Publication
		want []authz.Permission
	}{
		{"none", nil, nil},
		{"ConfigMap only", &noRestart, []authz.Permission{cm("create"), cm("patch")}},
		{"with restart labels", publication, []authz.Permission{cm("create"), cm("patch"), apps("daemonsets"), apps("deployments"), apps("statefulsets")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, PublicationPermissions(tc.pub)); diff != "" {
				t.Errorf("PublicationPermissions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCheckPublication: a user who may write the ConfigMap but not patch
// the workloads is refused, and the message names what is missing.
func TestCheckPublication(t *testing.T) {
	scheme, err := manager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"create configmaps": true, "patch configmaps": true}
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			sar := obj.(*authorizationv1.SubjectAccessReview)
			a := sar.Spec.ResourceAttributes
			sar.Status.Allowed = allowed[a.Verb+" "+a.Resource]
			return nil
		},
	}).Build()
	g := testGuard(t, c, scheme)
	user := authenticationv1.UserInfo{Username: "bob"}

	got, err := g.checkPublication(context.Background(), user, publication)
	if err != nil {
		t.Fatal(err)
	}
	want := `user "bob" may not publish into ConfigMap "scope" in namespace "op" (spec.publication): oria would write it and restart the labelled workloads there for them (missing: patch daemonsets.apps, patch deployments.apps, patch statefulsets.apps)`
	if len(got) != 1 || got[0] != want {
		t.Errorf("got %q\nwant %q", got, want)
	}

	allowed["patch deployments"], allowed["patch statefulsets"], allowed["patch daemonsets"] = true, true, true
	if got, err := g.checkPublication(context.Background(), user, publication); err != nil || len(got) != 0 {
		t.Errorf("refused although allowed: %v %v", got, err)
	}
	allowed["create configmaps"] = false
	got, _ = g.checkPublication(context.Background(), user, publication)
	if len(got) != 1 || !strings.Contains(got[0], `create configmaps "scope"`) {
		t.Errorf("got %q, want a refusal naming create configmaps", got)
	}
}
