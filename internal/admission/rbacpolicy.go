package admission

import (
	"context"
	"encoding/json"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/controller/rbacpolicy"
	"github.com/operator-framework/oria/internal/manager"
)

// checkPolicy checks an RBACPolicy create or spec update: the user must be
// allowed to bind the roles the policy compiles to (rbacpolicy.Compile, the
// controller's own compiler) wherever it binds them.
//
// Which APIs: those listed in spec.apis, whether the extension provides them
// yet or not (their role names are known; a role that does not exist needs
// "bind"). With spec.apis empty the policy covers every API of the
// extension, including those a later version adds, whose roles nobody can
// name today: that needs "bind" on every ClusterRole wherever the policy
// binds, on top of the roles of the APIs the extension has now.
func (g *Guard) checkPolicy(ctx context.Context, user authenticationv1.UserInfo, p *oriav1alpha1.RBACPolicy) ([]string, error) {
	crds, err := g.policyAPIs(ctx, p)
	if err != nil {
		return nil, err
	}
	c := rbacpolicy.Compile(p, crds)
	var grants []binding.Grant
	if c.Instance != nil {
		spec, err := compiledInstanceSpec(c)
		if err != nil {
			return nil, err
		}
		grants = binding.InstanceGrants(spec, c.Roles)
	}
	denials, err := g.Authorizer.CheckBind(ctx, user, grants, nil)
	if err != nil {
		return nil, err
	}
	out := messages(user, denials)
	if len(p.Spec.APIs) > 0 {
		return out, nil
	}
	places := binding.InstanceGrants(oriav1alpha1.ScopeInstanceSpec{Namespaces: p.Spec.Namespaces, NamespaceSelector: p.Spec.NamespaceSelector}, []string{""})
	denied, err := g.Authorizer.CheckBindAny(ctx, user, places)
	if err != nil {
		return nil, err
	}
	for _, d := range denied {
		out = append(out, fmt.Sprintf("user %q may not grant every API of ClusterExtension %q %s: spec.apis is empty, which includes APIs a later version of the extension adds, and that needs %q on every ClusterRole %s; list the APIs in spec.apis instead",
			user.Username, p.Spec.ExtensionName, d.Where(), "bind", there(d)))
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
			out[i] = a.Resource + "." + a.Group
		}
		return out, nil
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(manager.CRDMetadata().GroupVersionKind().GroupVersion().WithKind("CustomResourceDefinitionList"))
	if err := g.Reader.List(ctx, list, client.MatchingLabels{
		oriav1alpha1.LabelOLMOwnerKind: oriav1alpha1.OLMOwnerKindClusterExtension,
		oriav1alpha1.LabelOLMOwnerName: p.Spec.ExtensionName,
	}); err != nil {
		return nil, fmt.Errorf("listing CRDs of ClusterExtension %q: %w", p.Spec.ExtensionName, err)
	}
	out := make([]string, 0, len(list.Items))
	for _, crd := range list.Items {
		out = append(out, crd.Name)
	}
	return out, nil
}

// compiledInstanceSpec is the spec of the ScopeInstance a policy compiles
// into.
func compiledInstanceSpec(c rbacpolicy.Compiled) (oriav1alpha1.ScopeInstanceSpec, error) {
	var spec oriav1alpha1.ScopeInstanceSpec
	b, err := json.Marshal(c.Instance.Spec)
	if err != nil {
		return spec, fmt.Errorf("encoding the compiled ScopeInstance: %w", err)
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		return spec, fmt.Errorf("decoding the compiled ScopeInstance: %w", err)
	}
	return spec, nil
}
