package scopeinstance

import (
	"context"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
)

// A revocation always lands. An instance with a spec error (a missing or
// invalid template, a missing ServiceAccount, a subject it cannot bind)
// writes nothing new, but keeps at most what its last valid state granted
// (the bindings that exist) and its current spec still allows: an admin
// who narrows spec.namespaces, or removes a role or a subject from the
// template, while something else is wrong, is obeyed at once
// (binding.Narrow). A template that does not exist allows nothing: its
// bindings go (fail closed). Keeping them would keep bindings to roles
// nobody judges any more, among them its inline roles, which oria deletes
// with the template, so that whoever creates a ClusterRole under such a
// name would choose what they grant (the sequence fuzzer's seed
// 1795879018575510949). Re-creating the template binds again.

// frozenPlan is the plan of an instance with a spec error: the bindings to
// delete are those the current spec no longer allows, and, for an instance
// with a ceiling, those its ServiceAccount no longer vouches for (frozen).
func (r *Reconciler) frozenPlan(ctx context.Context, si *oriav1alpha1.ScopeInstance, serr *binding.SpecError,
	nss []binding.Namespace, recreated []string, open bool) (*revokePlan, error) {
	p := &revokePlan{specErr: serr, ceiling: si.Spec.ServiceAccount != nil, cluster: binding.IsClusterWide(si.Spec)}
	rbs, crbs, err := r.existingBindings(si.Name)
	if err != nil {
		return nil, err
	}
	allow, err := r.allowance(ctx, si, nss, recreated)
	if err != nil {
		return nil, err
	}
	// A gate is narrowed to what the spec allows, and empty before the
	// window; one left over from a gated spec keeps its sources, if the
	// spec still names them, until the spec is fixed.
	if p.gate, err = r.frozenGate(ctx, si, &allow, open); err != nil {
		return nil, err
	}
	if len(rbs)+len(crbs) == 0 {
		return p, nil
	}
	p.rbs = binding.Narrow(rbs, allow, binding.RoleOfRoleBinding, binding.SubjectsOfRoleBinding)
	p.crbs = binding.Narrow(crbs, allow, binding.RoleOfClusterRoleBinding, binding.SubjectsOfClusterRoleBinding)
	if p.ceiling {
		unvouchedRBs, unvouchedCRBs, err := r.frozen(ctx, si, rbs, crbs)
		if err != nil {
			return nil, err
		}
		p.rbs = union(p.rbs, unvouchedRBs)
		p.crbs = union(p.crbs, unvouchedCRBs)
	}
	return p, nil
}

// allowance reads what the current spec of si still allows (see
// binding.Allowance).
func (r *Reconciler) allowance(ctx context.Context, si *oriav1alpha1.ScopeInstance, nss []binding.Namespace, recreated []string) (binding.Allowance, error) {
	var a binding.Allowance
	if targets, serr := binding.ResolveTargets(si.Spec, nss); serr == nil {
		targets = targets.Without(recreated)
		a.Targets = &targets
	}
	t := &oriav1alpha1.ScopeTemplate{}
	switch err := r.Client.Get(ctx, types.NamespacedName{Name: si.Spec.ScopeTemplateName}, t); {
	case apierrors.IsNotFound(err):
		// Known to be gone: no role and no subject is allowed.
		a.KnownTemplate = true
		return a, nil
	case err != nil:
		return a, fmt.Errorf("reading ScopeTemplate %q: %w", si.Spec.ScopeTemplateName, err)
	}
	a.KnownTemplate = true
	a.Roles = binding.RoleNames(binding.Roles(t))
	a.Subjects = t.Spec.BindingTemplate.Subjects
	return a, nil
}

// union returns a and the objects of b not in a (by key).
func union[T client.Object](a, b []T) []T {
	seen := engine.ByKey(a)
	for _, o := range b {
		if _, ok := seen[engine.Key(o)]; !ok {
			a = append(a, o)
		}
	}
	return a
}

// withholdAhead drops from the intended bindings those of roles ahead (an
// inline role whose rules are not yet its template's) that do not exist:
// a new binding is made only against the rules the guard checked for it.
// Existing ones stay intended (kept, and, for an instance with a
// ceiling, re-vouched for the new rules).
func (p *bindPlan) withholdAhead() {
	if len(p.ahead) == 0 {
		return
	}
	rbs, crbs := engine.ByKey(p.existingRBs), engine.ByKey(p.existingCRBs)
	n := len(p.wantRBs) + len(p.wantCRBs)
	p.wantRBs = slices.DeleteFunc(p.wantRBs, func(b *rbacv1.RoleBinding) bool {
		_, ok := rbs[engine.Key(b)]
		return !ok && slices.Contains(p.ahead, binding.RoleOfRoleBinding(b))
	})
	p.wantCRBs = slices.DeleteFunc(p.wantCRBs, func(b *rbacv1.ClusterRoleBinding) bool {
		_, ok := crbs[engine.Key(b)]
		return !ok && slices.Contains(p.ahead, binding.RoleOfClusterRoleBinding(b))
	})
	p.withheld = n - len(p.wantRBs) - len(p.wantCRBs)
}
