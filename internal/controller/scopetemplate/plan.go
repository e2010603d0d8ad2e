package scopetemplate

import (
	"context"
	"fmt"
	"slices"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/lookup"
	"github.com/operator-framework/oria/internal/ownership"
)

// plan is what one reconcile of a template read and decided.
type plan struct {
	// recheck is the configured recheck interval, for the status messages.
	recheck time.Duration
	// instances are the names of the ScopeInstances using the template,
	// sorted.
	instances []string
	// specErr is set when the template is invalid: nothing is written then.
	specErr *binding.SpecError
	// roles are the template's role names in spec order.
	roles []string
	// desired are the inline ClusterRoles that must exist (none while no
	// instance uses the template); cached the cached roles at their names.
	desired []*rbacv1.ClusterRole
	cached  map[types.NamespacedName]*rbacv1.ClusterRole
	// stale are the template's roles that are no longer intended: removed
	// from the spec, renamed, or the template is no longer used.
	stale []*rbacv1.ClusterRole
	// missing are the referenced ClusterRoles that do not exist.
	missing []string
	// held are the inline roles of desired whose new rules are held back
	// (see ceiling.go), each with the instances (sorted) whose
	// ServiceAccount ceiling has not confirmed them yet.
	held map[string][]string
}

// Gather reads what a reconcile of t needs from the cache and decides the
// roles with the pure functions of package binding.
func (r *Reconciler) Gather(ctx context.Context, t *oriav1alpha1.ScopeTemplate) (*plan, error) {
	var instances oriav1alpha1.ScopeInstanceList
	if err := r.Client.List(ctx, &instances, client.MatchingFields{lookup.IndexScopeTemplateName: t.Name}); err != nil {
		return nil, fmt.Errorf("listing the ScopeInstances of the template: %w", err)
	}
	p := &plan{recheck: r.recheck()}
	var withCeiling []string
	for _, si := range instances.Items {
		p.instances = append(p.instances, si.Name)
		if si.Spec.ServiceAccount != nil {
			withCeiling = append(withCeiling, si.Name)
		}
	}
	slices.Sort(p.instances)
	// Spec errors are terminal and change nothing: the roles that exist
	// keep granting what they granted until the template is fixed.
	if p.specErr = binding.ValidateTemplate(t); p.specErr != nil {
		return p, nil
	}
	p.roles = binding.RoleNames(binding.Roles(t))
	var err error
	if p.missing, err = r.missingRoles(ctx, t); err != nil {
		return nil, err
	}
	if len(p.instances) > 0 {
		p.desired = binding.ClusterRoles(t)
	}
	p.cached = map[types.NamespacedName]*rbacv1.ClusterRole{}
	keep := map[string]bool{}
	for _, want := range p.desired {
		keep[want.Name] = true
		cur := &rbacv1.ClusterRole{}
		switch err := r.Client.Get(ctx, engine.Key(want), cur); {
		case err == nil:
			p.cached[engine.Key(want)] = cur
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading ClusterRole %q: %w", want.Name, err)
		}
	}
	existing, err := r.cachedRoles(ctx, t.Name)
	if err != nil {
		return nil, err
	}
	for _, cr := range existing {
		if !keep[cr.Name] {
			p.stale = append(p.stale, cr)
		}
	}
	if p.held, err = r.held(p, withCeiling); err != nil {
		return nil, err
	}
	return p, nil
}

// cachedRoles returns the cached ClusterRoles labelled as the template's
// and not controlled by another template.
func (r *Reconciler) cachedRoles(ctx context.Context, template string) ([]*rbacv1.ClusterRole, error) {
	var list rbacv1.ClusterRoleList
	if err := r.Client.List(ctx, &list, client.MatchingLabels(ownership.TemplateLabels(template))); err != nil {
		return nil, fmt.Errorf("listing the ClusterRoles of ScopeTemplate %q: %w", template, err)
	}
	var out []*rbacv1.ClusterRole
	for i := range list.Items {
		if cr := &list.Items[i]; ownership.NotControlledByOther(cr, ownership.KindScopeTemplate, template) {
			out = append(out, cr)
		}
	}
	return out, nil
}

// missingRoles returns the ClusterRoles t references by name that do not
// exist: oria's own roles are looked up in the cache, others (built-in or
// bundle-provided roles) with one metadata-only read each.
func (r *Reconciler) missingRoles(ctx context.Context, t *oriav1alpha1.ScopeTemplate) ([]string, error) {
	var missing []string
	for _, role := range binding.Roles(t) {
		if role.Inline {
			continue
		}
		err := r.Client.Get(ctx, client.ObjectKey{Name: role.Name}, &rbacv1.ClusterRole{})
		if apierrors.IsNotFound(err) {
			err = r.APIReader.Get(ctx, client.ObjectKey{Name: role.Name}, lookup.ClusterRoleMetadata())
		}
		switch {
		case apierrors.IsNotFound(err):
			missing = append(missing, role.Name)
		case err != nil:
			return nil, fmt.Errorf("reading ClusterRole %q: %w", role.Name, err)
		}
	}
	return missing, nil
}
