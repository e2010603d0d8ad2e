package admission

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/authz"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/lookup"
	"github.com/operator-framework/oria/internal/policy"
)

// checkPolicy checks an RBACPolicy create or spec update: the user must be
// allowed to bind the roles the policy compiles to (policy.Compile, the
// controller's own compiler) wherever it binds them.
//
// Which APIs: those listed in spec.apis, whether the extension provides them
// yet or not (their role names are known; a role that does not exist needs
// "bind"). With spec.apis empty the policy covers every API of the
// extension, including those a later version adds, whose roles nobody can
// name today: that needs "bind" on every ClusterRole wherever the policy
// binds, on top of the roles of the APIs the extension has now.
//
// A policy with a serviceAccount is checked by checkServiceAccount instead
// (see checkInstance).
func (g *Guard) checkPolicy(ctx context.Context, user authenticationv1.UserInfo, p *oriav1alpha1.RBACPolicy) ([]string, error) {
	if sa := p.Spec.ServiceAccount; sa != nil {
		return g.checkServiceAccount(ctx, user, *sa)
	}
	crds, err := g.policyAPIs(ctx, p)
	if err != nil {
		return nil, err
	}
	c := policy.Compile(p, crds)
	var grants []binding.Grant
	if c.Instance != nil {
		grants = binding.InstanceGrants(c.Instance.Spec, c.Roles)
	}
	denials, err := g.authz.CheckBind(ctx, user, grants, nil)
	if err != nil {
		return nil, err
	}
	out := messages(user, denials)
	if len(p.Spec.APIs) > 0 {
		return out, nil
	}
	// Where the compiled ScopeInstance binds: Compile copies the policy's
	// namespaces and selector into it (and compiles nothing without an API).
	places := binding.InstanceGrants(oriav1alpha1.ScopeInstanceSpec{Namespaces: p.Spec.Namespaces, NamespaceSelector: p.Spec.NamespaceSelector}, []string{""})
	denied, err := g.authz.CheckBindEveryRole(ctx, user, places)
	if err != nil {
		return nil, err
	}
	for _, d := range denied {
		out = append(out, fmt.Sprintf("user %q may not grant every API of ClusterExtension %q %s: spec.apis is empty, which includes APIs a later version of the extension adds, and that needs %q on every ClusterRole %s; list the APIs in spec.apis instead",
			user.Username, p.Spec.ExtensionName, d.Where(), "bind", authz.ScopeWord(d)))
	}
	return out, nil
}

// policyAPIs returns the CRD names the policy is checked for: spec.apis when
// set, else the CRDs operator-controller installed for the extension, read
// from the API server.
func (g *Guard) policyAPIs(ctx context.Context, p *oriav1alpha1.RBACPolicy) ([]string, error) {
	if len(p.Spec.APIs) > 0 {
		out := make([]string, len(p.Spec.APIs))
		for i, a := range p.Spec.APIs {
			out[i] = policy.CRDName(a)
		}
		return out, nil
	}
	// The same definition of "the APIs of an extension" as the controller's,
	// read from the API server rather than the cache.
	return lookup.ExtensionCRDs(ctx, g.reader, p.Spec.ExtensionName)
}
