package admission

import (
	"context"
	"encoding/json"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/authz"
	"github.com/operator-framework/oria/internal/binding"
)

// checkInstance checks a ScopeInstance create or spec update: for every role
// of its template, the user must be allowed to bind it wherever the instance
// binds (each listed namespace; cluster-wide for a selector or no
// namespaces), by "bind" or by holding its permissions there. The whole new
// spec is checked, as the API server checks a whole role on update: a
// widened selector or a new namespace is refused even if the instance was
// written by an admin.
//
// A template that does not exist yet could be created later with any roles
// (by an admin, whose change is not checked against this user), so naming
// one needs "bind" on every ClusterRole wherever the instance binds, as
// Kubernetes requires "bind" to bind a role that does not exist.
//
// An instance with a serviceAccount is checked by checkServiceAccount
// instead: its grants are capped by that ServiceAccount at write time.
//
// A publication is checked in either case (checkPublication): oria writes
// the ConfigMap and restarts workloads with its own rights.
func (g *Guard) checkInstance(ctx context.Context, user authenticationv1.UserInfo, si *oriav1alpha1.ScopeInstance, planned *oriav1alpha1.ScopeTemplate) ([]string, error) {
	grants, err := g.checkGrants(ctx, user, si, planned)
	if err != nil {
		return nil, err
	}
	pub, err := g.checkPublication(ctx, user, si.Spec.Publication)
	if err != nil {
		return nil, err
	}
	return append(grants, pub...), nil
}

// checkGrants checks what the instance's bindings grant. planned is the
// template a dry run of the instance carries (plannedTemplate), used when
// no template of that name exists; nil otherwise.
func (g *Guard) checkGrants(ctx context.Context, user authenticationv1.UserInfo, si *oriav1alpha1.ScopeInstance, planned *oriav1alpha1.ScopeTemplate) ([]string, error) {
	if sa := si.Spec.ServiceAccount; sa != nil {
		return g.checkServiceAccount(ctx, user, *sa)
	}
	t := &oriav1alpha1.ScopeTemplate{}
	err := g.reader.Get(ctx, client.ObjectKey{Name: si.Spec.ScopeTemplateName}, t)
	if apierrors.IsNotFound(err) && planned != nil {
		// A dry run of an instance whose template the same input creates
		// first: judged as the write after the template's would be.
		t, err = planned, nil
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			denied, err := g.authz.CheckBindEveryRole(ctx, user, binding.InstanceGrants(si.Spec, []string{""}))
			out := make([]string, len(denied))
			for i, d := range denied {
				out[i] = fmt.Sprintf("user %q may not bind the roles of ScopeTemplate %q, which does not exist yet, %s: needs %q on every ClusterRole %s (create the template first)",
					user.Username, si.Spec.ScopeTemplateName, d.Where(), "bind", authz.ScopeWord(d))
			}
			return out, err
		}
		return nil, fmt.Errorf("reading ScopeTemplate %q: %w", si.Spec.ScopeTemplateName, err)
	}
	roles := binding.Roles(t)
	denials, err := g.authz.CheckBind(ctx, user, binding.InstanceGrants(si.Spec, binding.RoleNames(roles)), InlineRules(roles))
	if err != nil {
		return nil, err
	}
	return messages(user, denials), nil
}

// plannedTemplate returns the template a dry run of si carries in its
// AnnotationPlannedTemplate (kubectl oria plan -f: the same input creates
// it first), when it is the template si names; nil on a real write (the
// annotation is then ignored) or when it is absent or not that template.
// A dry run persists nothing, so what it claims can only mislead its own
// requester's plan, never grant.
func plannedTemplate(dryRun bool, si *oriav1alpha1.ScopeInstance) (*oriav1alpha1.ScopeTemplate, error) {
	raw, ok := si.Annotations[oriav1alpha1.AnnotationPlannedTemplate]
	if !dryRun || !ok {
		return nil, nil
	}
	t := &oriav1alpha1.ScopeTemplate{}
	if err := json.Unmarshal([]byte(raw), t); err != nil {
		return nil, fmt.Errorf("decoding annotation %s: %w", oriav1alpha1.AnnotationPlannedTemplate, err)
	}
	if t.Name != si.Spec.ScopeTemplateName {
		return nil, nil
	}
	return t, nil
}
