package admission

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
)

// checkTemplate checks a ScopeTemplate create (old nil) or spec update:
//
//   - every inline role that is new or whose rules change is a ClusterRole
//     oria will write: the user needs "escalate" on it or every permission
//     it grants, cluster-wide;
//   - a template is bound where its instances bind it today (an instance
//     may even exist before its template): the user needs to be allowed to
//     bind every role of the new template wherever those instances bind.
//     This is what keeps a user from editing an admin's template after the
//     admin bound it;
//   - an update that gives its roles to a new subject, or adds a role, is
//     also checked cluster-wide (binding.Widened): any instance may bind
//     the template later, an admin's included, so the user must be allowed
//     to grant what they add anywhere. This is what keeps a user from
//     rewriting the subjects of a template an admin reviewed and is about
//     to bind. Creating a template is not checked so: the admin who binds a
//     template someone else wrote reviews it (kubectl oria can show what it
//     binds).
func (g *Guard) checkTemplate(ctx context.Context, user authenticationv1.UserInfo, old, t *oriav1alpha1.ScopeTemplate) ([]string, error) {
	roles := binding.Roles(t)
	denials, err := g.authz.CheckEscalate(ctx, user, ChangedInlineRoles(old, t))
	if err != nil {
		return nil, err
	}
	instances, err := g.instancesOf(ctx, t.Name)
	if err != nil {
		return nil, err
	}
	var grants []binding.Grant
	for _, si := range instances {
		grants = append(grants, binding.InstanceGrants(si.Spec, binding.RoleNames(roles))...)
	}
	bind, err := g.authz.CheckBind(ctx, user, binding.SortGrants(grants), InlineRules(roles))
	if err != nil {
		return nil, err
	}
	out := messages(user, append(denials, bind...))
	if old == nil {
		return out, nil
	}
	var widened []binding.Grant
	for _, r := range binding.Widened(old, t) {
		widened = append(widened, binding.Grant{Role: r.Name})
	}
	anywhere, err := g.authz.CheckBind(ctx, user, widened, InlineRules(roles))
	if err != nil {
		return nil, err
	}
	for _, m := range messages(user, anywhere) {
		out = append(out, m+"; a change of an existing ScopeTemplate's subjects or roles is checked cluster-wide, since any instance, an admin's later one included, may bind it anywhere (create a new template instead)")
	}
	return out, nil
}

// InlineRules maps each inline role of a template to its rules: what the
// role grants once oria has written it.
func InlineRules(roles []binding.Role) map[string][]rbacv1.PolicyRule {
	out := map[string][]rbacv1.PolicyRule{}
	for _, r := range roles {
		if r.Inline {
			out[r.Name] = r.Rules
		}
	}
	return out
}

// ChangedInlineRoles returns the inline roles of t that oria would write
// anew: all of them on create (old nil), on update those that are new or
// whose rules differ. An unchanged role is not written again.
func ChangedInlineRoles(old, t *oriav1alpha1.ScopeTemplate) map[string][]rbacv1.PolicyRule {
	before := map[string][]rbacv1.PolicyRule{}
	if old != nil {
		before = InlineRules(binding.Roles(old))
	}
	out := map[string][]rbacv1.PolicyRule{}
	for name, rules := range InlineRules(binding.Roles(t)) {
		if prev, ok := before[name]; !ok || !equality.Semantic.DeepEqual(prev, rules) {
			out[name] = rules
		}
	}
	return out
}

// instancesOf lists the ScopeInstances of the named template from the API
// server.
func (g *Guard) instancesOf(ctx context.Context, template string) ([]oriav1alpha1.ScopeInstance, error) {
	var list oriav1alpha1.ScopeInstanceList
	if err := g.reader.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing ScopeInstances: %w", err)
	}
	var out []oriav1alpha1.ScopeInstance
	for _, si := range list.Items {
		if si.Spec.ScopeTemplateName == template && si.DeletionTimestamp.IsZero() {
			out = append(out, si)
		}
	}
	return out, nil
}
