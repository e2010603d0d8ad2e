package admission

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/authz"
)

// checkServiceAccount checks an object that names a ServiceAccount as the
// ceiling of what it grants (spec.serviceAccount): the user must be allowed
// to impersonate that ServiceAccount. Nothing else about the grant is
// checked here: oria writes the bindings as the ServiceAccount, and the API
// server refuses whatever the ServiceAccount could not grant itself, so the
// user obtains through oria exactly what they could obtain by impersonating
// the ServiceAccount directly. (OLM v1 dropped ClusterExtension's
// serviceAccount because it lacked this very check.)
func (g *Guard) checkServiceAccount(ctx context.Context, user authenticationv1.UserInfo, sa oriav1alpha1.ServiceAccountReference) ([]string, error) {
	p := authz.Permission{Verb: "impersonate", Resource: "serviceaccounts", Name: sa.Name, Namespace: sa.Namespace}
	ok, err := g.authz.Allowed(ctx, user, p)
	if err != nil || ok {
		return nil, err
	}
	return []string{fmt.Sprintf("user %q may not name ServiceAccount %q in namespace %q in spec.serviceAccount: needs %q on serviceaccounts/%s in namespace %q (oria writes the bindings as that ServiceAccount)",
		user.Username, sa.Name, sa.Namespace, "impersonate", sa.Name, sa.Namespace)}, nil
}
