package scopeinstance

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/publish"
)

// plan is what one reconcile read and decided. Every plan records when
// and how the window (spec.notBefore, spec.expiresAt) was judged and the
// namespace UIDs to record (pins: status.namespaceUIDs, see
// binding.PinNamespaces); then it has one of two shapes, exactly one set:
//
//   - bind: inside the window, with a valid spec: the bindings to write,
//     keep and delete (bindPlan, gather);
//   - revoke: outside the window (closedPlan, window.go), or with a spec
//     error (frozenPlan, frozen.go): nothing is written, only the bindings
//     to delete (revokePlan).
type plan struct {
	// recheck is how often the controller looks again at what it does not
	// watch (the configured interval), for the status messages.
	recheck time.Duration
	// now is the instant the window was judged at, phase where now lies in
	// it.
	now    time.Time
	window binding.Window
	phase  binding.Phase
	// priority is the priority of the requeue at the window's next
	// instant (instantPriority).
	priority int
	pins     map[string]string
	// pinnedFor is what pins are recorded under (status.pinnedFor,
	// binding.PinKey).
	pinnedFor string

	bind   *bindPlan
	revoke *revokePlan
}

// bindPlan is the plan of an instance inside its window with a valid spec.
type bindPlan struct {
	template *oriav1alpha1.ScopeTemplate
	// roles to bind: referenced roles and inline roles that are in place.
	roles []string
	// pending inline roles not created yet: their existing bindings stay,
	// no new ones are made.
	pending []string
	// conflicted inline roles whose name a foreign ClusterRole holds.
	conflicted []string
	// ahead are inline roles in place whose rules are not (yet) the
	// template's: no new binding of them is made (withholdAhead), existing
	// ones stay; withheld counts the bindings not made.
	ahead    []string
	withheld int
	targets  binding.Targets
	// wantRBs / wantCRBs are the intended bindings; existing* the cached
	// bindings of the instance; stale* those to delete.
	wantRBs                 []*rbacv1.RoleBinding
	wantCRBs                []*rbacv1.ClusterRoleBinding
	existingRBs, staleRBs   []*rbacv1.RoleBinding
	existingCRBs, staleCRBs []*rbacv1.ClusterRoleBinding
	// ceiling is set for an instance with a ServiceAccount ceiling
	// (spec.serviceAccount; see ceiling.go), inlineRules then the rules
	// its inline roles in place have now.
	ceiling     *ceiling
	inlineRules map[string][]rbacv1.PolicyRule
	// gate is set for a gated instance, and for one with a gate left
	// over (gate.go).
	gate *gatePlan
}

// revokePlan is the plan of an instance that writes nothing: outside its
// window (every binding goes), or with a spec error (the bindings its
// current spec no longer allows go, and, with a ceiling, those its
// ServiceAccount no longer vouches for).
type revokePlan struct {
	// specErr is the spec error; unset outside the window.
	specErr *binding.SpecError
	// cluster: the instance binds cluster-wide (its status' scope).
	cluster bool
	// ceiling: the instance names a ceiling ServiceAccount.
	ceiling bool
	rbs     []*rbacv1.RoleBinding
	crbs    []*rbacv1.ClusterRoleBinding
	// gate is the instance's gate, if it has one: emptied first (outside
	// the window) or narrowed (a spec error; gate.go).
	gate *gatePlan
}

// hasCeiling reports whether the instance names a ceiling ServiceAccount:
// what its bindings may grant then depends on what oria does not watch.
func (p *plan) hasCeiling() bool {
	if p.bind != nil {
		return p.bind.ceiling != nil
	}
	return p.revoke.ceiling
}

// serviceAccountMissing reports whether the instance's ServiceAccount does
// not exist (a spec error looked at again within ServiceAccountRecheck).
func (p *plan) serviceAccountMissing() bool {
	return p.revoke != nil && p.revoke.specErr != nil && p.revoke.specErr.Reason == oriav1alpha1.ReasonServiceAccountNotFound
}

// gather reads what a reconcile of si inside its window (see Gather) needs
// and decides the bindings with the pure functions of package binding. A
// gated instance (gate.go) is gathered before its window too (open false):
// its bindings are made then, to its empty gate.
func (r *Reconciler) gather(ctx context.Context, si *oriav1alpha1.ScopeInstance, open bool) (*plan, error) {
	var nss []binding.Namespace
	if !binding.IsClusterWide(si.Spec) {
		var err error
		if nss, err = r.namespaces(ctx); err != nil {
			return nil, err
		}
	}
	pins, recreated := binding.PinNamespaces(si.Spec.Namespaces, nss, si.Status.NamespaceUIDs, binding.Repin(si))
	b, serr, err := r.resolve(ctx, si, nss, recreated)
	if err != nil {
		return nil, err
	}
	if serr == nil {
		if serr, err = r.checkServiceAccount(ctx, si); err != nil {
			return nil, err
		}
	}
	if err := publish.Validate(si.Spec.Publication); serr == nil && err != nil {
		serr = &binding.SpecError{Reason: oriav1alpha1.ReasonInvalidSpec, Message: err.Error() + "; nothing is changed until it is fixed"}
	}
	if serr != nil {
		rp, err := r.frozenPlan(ctx, si, serr, nss, recreated, open)
		if err != nil {
			return nil, err
		}
		return &plan{recheck: r.recheck(), pins: pins, pinnedFor: binding.PinKey(si.Spec), revoke: rp}, nil
	}
	subj := b.template.Spec.BindingTemplate.Subjects
	if b.targets.Cluster {
		b.wantCRBs = binding.ClusterRoleBindings(si, b.template.Name, b.roles, subj)
	} else {
		b.wantRBs = binding.RoleBindings(si, b.template.Name, b.roles, subj, b.targets.Namespaces)
	}
	if binding.Gated(si.Spec) {
		if err := r.gateBindPlan(ctx, si, b, open); err != nil {
			return nil, err
		}
	} else if b.gate, err = r.closedGate(ctx, si); err != nil {
		return nil, err
	}
	if b.existingRBs, b.existingCRBs, err = r.existingBindings(si.Name); err != nil {
		return nil, err
	}
	b.withholdAhead()
	keep := binding.Keep(si.Name, append(binding.Objects(b.wantRBs), binding.Objects(b.wantCRBs)...), b.targets, b.pending)
	b.staleRBs = binding.Stale(b.existingRBs, keep, b.targets)
	b.staleCRBs = binding.Stale(b.existingCRBs, keep, b.targets)
	if sa := si.Spec.ServiceAccount; sa != nil {
		if b.ceiling, err = r.ceilings(ctx, *sa, b); err != nil {
			return nil, err
		}
		b.ceiling.annotate(b)
	}
	return &plan{recheck: r.recheck(), pins: pins, pinnedFor: binding.PinKey(si.Spec), bind: b}, nil
}

// resolve reads the template, checks the spec and finds the targets. A
// SpecError is the user's to fix; an error is retried.
func (r *Reconciler) resolve(ctx context.Context, si *oriav1alpha1.ScopeInstance, nss []binding.Namespace, recreated []string) (*bindPlan, *binding.SpecError, error) {
	if _, serr := binding.Selector(si.Spec); serr != nil {
		return nil, serr, nil
	}
	t := &oriav1alpha1.ScopeTemplate{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: si.Spec.ScopeTemplateName}, t); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &binding.SpecError{Reason: oriav1alpha1.ReasonTemplateNotFound, Message: fmt.Sprintf(
				"ScopeTemplate %q does not exist: nothing is granted (its bindings are removed) until it does", si.Spec.ScopeTemplateName)}, nil
		}
		return nil, nil, fmt.Errorf("reading ScopeTemplate %q: %w", si.Spec.ScopeTemplateName, err)
	}
	if serr := binding.ValidateTemplate(t); serr != nil {
		return nil, &binding.SpecError{Reason: oriav1alpha1.ReasonTemplateInvalid, Message: fmt.Sprintf(
			"ScopeTemplate %q is not valid (%s: %s); existing bindings are kept until it is fixed", t.Name, serr.Reason, serr.Message)}, nil
	}
	p := &bindPlan{template: t}
	if binding.IsClusterWide(si.Spec) {
		if serr := binding.ValidateClusterSubjects(t.Spec.BindingTemplate.Subjects); serr != nil {
			serr.Message = fmt.Sprintf("ScopeTemplate %q: %s", t.Name, serr.Message)
			return nil, serr, nil
		}
		p.targets = binding.Targets{Cluster: true}
	} else {
		targets, serr := binding.ResolveTargets(si.Spec, nss)
		if serr != nil {
			return nil, serr, nil
		}
		p.targets = targets.Without(recreated)
	}
	for _, role := range binding.Roles(t) {
		if !role.Inline {
			p.roles = append(p.roles, role.Name)
			continue
		}
		state, cr, err := r.inlineRoleState(ctx, t.Name, role.Name)
		if err != nil {
			return nil, nil, err
		}
		switch state {
		case roleReady:
			p.roles = append(p.roles, role.Name)
			if !equality.Semantic.DeepEqual(cr.Rules, role.Rules) {
				p.ahead = append(p.ahead, role.Name)
			}
			if si.Spec.ServiceAccount != nil {
				if p.inlineRules == nil {
					p.inlineRules = map[string][]rbacv1.PolicyRule{}
				}
				p.inlineRules[role.Name] = cr.Rules
			}
		case rolePending:
			p.pending = append(p.pending, role.Name)
		case roleConflict:
			p.conflicted = append(p.conflicted, role.Name)
		}
	}
	return p, nil, nil
}

type roleState int

const (
	roleReady roleState = iota
	rolePending
	roleConflict
)

// inlineRoleState tells whether an inline role of template is in place
// (oria's, for this template; returned), not created yet, or held by
// someone else.
func (r *Reconciler) inlineRoleState(ctx context.Context, template, role string) (roleState, *rbacv1.ClusterRole, error) {
	cr := &rbacv1.ClusterRole{}
	err := r.Client.Get(ctx, types.NamespacedName{Name: role}, cr)
	if apierrors.IsNotFound(err) {
		// Not in oria's cache: absent, or without oria's labels.
		err = r.APIReader.Get(ctx, types.NamespacedName{Name: role}, cr)
		if apierrors.IsNotFound(err) {
			return rolePending, nil, nil
		}
	}
	if err != nil {
		return 0, nil, fmt.Errorf("reading ClusterRole %q: %w", role, err)
	}
	if ownership.TemplateOwns(cr, template) {
		return roleReady, cr, nil
	}
	return roleConflict, nil, nil
}

// namespaces returns every namespace from the metadata cache.
func (r *Reconciler) namespaces(ctx context.Context) ([]binding.Namespace, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	out := make([]binding.Namespace, len(list.Items))
	for i, ns := range list.Items {
		out[i] = binding.Namespace{Name: ns.Name, Labels: ns.Labels, Terminating: !ns.DeletionTimestamp.IsZero(), UID: string(ns.UID)}
	}
	return out, nil
}

// existingBindings returns the cached bindings of the named instance
// (lookup.InstanceBindings). They are the cache's own objects, read-only:
// the engine copies an object before it changes it (5,000 bindings per
// reconcile at scale, never copied).
func (r *Reconciler) existingBindings(instance string) ([]*rbacv1.RoleBinding, []*rbacv1.ClusterRoleBinding, error) {
	rbs, crbs, err := r.Bindings.List(names.LabelValue(instance))
	if err != nil {
		return nil, nil, fmt.Errorf("listing the bindings of ScopeInstance %q: %w", instance, err)
	}
	// Label values of long names are hashed: a binding controlled by
	// another instance with the same value is not this one's.
	another := func(o client.Object) bool {
		return !ownership.NotControlledByOther(o, ownership.KindScopeInstance, instance)
	}
	return slices.DeleteFunc(rbs, func(b *rbacv1.RoleBinding) bool { return another(b) }),
		slices.DeleteFunc(crbs, func(b *rbacv1.ClusterRoleBinding) bool { return another(b) }), nil
}
