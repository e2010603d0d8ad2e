package admission

import (
	"context"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/authz"
)

// PublicationPermissions are what a ScopeInstance's publication makes oria
// do, as permissions its author must hold: write the named ConfigMap
// (create and patch configmaps/<name>: oria creates it by server-side
// apply), and, with restart labels, patch the Deployments, StatefulSets
// and DaemonSets of that namespace.
func PublicationPermissions(pub *oriav1alpha1.Publication) []authz.Permission {
	if pub == nil {
		return nil
	}
	ns, name := pub.ConfigMap.Namespace, pub.ConfigMap.Name
	perms := []authz.Permission{
		{Verb: "create", Resource: "configmaps", Name: name, Namespace: ns},
		{Verb: "patch", Resource: "configmaps", Name: name, Namespace: ns},
	}
	if len(pub.RestartLabels) > 0 {
		for _, r := range []string{"daemonsets", "deployments", "statefulsets"} {
			perms = append(perms, authz.Permission{Verb: "patch", Group: "apps", Resource: r, Namespace: ns})
		}
	}
	return perms
}

// checkPublication checks spec.publication: oria writes the ConfigMap and
// restarts the workloads with its own rights, so the user must hold every
// PublicationPermissions themselves.
func (g *Guard) checkPublication(ctx context.Context, user authenticationv1.UserInfo, pub *oriav1alpha1.Publication) ([]string, error) {
	perms := PublicationPermissions(pub)
	if len(perms) == 0 {
		return nil, nil
	}
	missing, err := g.authz.Denied(ctx, user, perms, len(perms))
	if err != nil || len(missing) == 0 {
		return nil, err
	}
	names := make([]string, len(missing))
	for i, p := range missing {
		names[i] = p.String()
	}
	return []string{fmt.Sprintf("user %q may not publish into ConfigMap %q in namespace %q (spec.publication): oria would write it and restart the labelled workloads there for them (missing: %s)",
		user.Username, pub.ConfigMap.Name, pub.ConfigMap.Namespace, strings.Join(names, ", "))}, nil
}
