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

// plan is what one reconcile read and decided.
type plan struct {
	// recheck is how often the controller looks again at what it does not
	// watch (the configured interval), for the status messages.
	recheck time.Duration
	// specErr is set when the spec (or its template) must be fixed by the
	// user: nothing new is written then, and existing bindings stay only as
	// far as the current spec still allows them (frozenPlan).
	specErr  *binding.SpecError
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
	// pins are the namespace UIDs to record (status.namespaceUIDs; see
	// binding.PinNamespaces).
	pins    map[string]string
	targets binding.Targets
	// wantRBs / wantCRBs are the intended bindings; existing* the cached
	// bindings of the instance; stale* those to delete.
	wantRBs                 []*rbacv1.RoleBinding
	wantCRBs                []*rbacv1.ClusterRoleBinding
	existingRBs, staleRBs   []*rbacv1.RoleBinding
	existingCRBs, staleCRBs []*rbacv1.ClusterRoleBinding
	// ceiling is set for an instance with a serviceAccount (attenuated;
	// see ceiling.go) without a spec error; inlineRules are then the rules
	// its inline roles in place have now. With a spec error, stale* are the
	// bindings its ServiceAccount no longer vouches for.
	attenuated  bool
	ceiling     *ceiling
	inlineRules map[string][]rbacv1.PolicyRule
	// now is the instant the window (spec.notBefore, spec.expiresAt) was
	// judged at, phase where now lies in it: outside (Pending, Expired)
	// the plan only deletes (stale* are every binding; see window.go).
	now    time.Time
	window binding.Window
	phase  binding.Phase
}

// serviceAccountMissing reports whether the instance's ServiceAccount does
// not exist (a spec error looked at again within ServiceAccountRecheck).
func (p *plan) serviceAccountMissing() bool {
	return p.specErr != nil && p.specErr.Reason == oriav1alpha1.ReasonServiceAccountNotFound
}

// gather reads what a reconcile of si inside its window (see Gather) needs
// and decides the bindings with the pure functions of package binding.
func (r *Reconciler) gather(ctx context.Context, si *oriav1alpha1.ScopeInstance) (*plan, error) {
	var nss []binding.Namespace
	if !binding.IsClusterWide(si.Spec) {
		var err error
		if nss, err = r.namespaces(ctx); err != nil {
			return nil, err
		}
	}
	pins, recreated := binding.PinNamespaces(si.Spec.Namespaces, nss, si.Status.NamespaceUIDs, si.Status.ObservedGeneration != si.Generation)
	p, serr, err := r.resolve(ctx, si, nss, recreated)
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
		return r.frozenPlan(ctx, si, serr, nss, pins, recreated)
	}
	p.pins = pins
	subj := p.template.Spec.BindingTemplate.Subjects
	if p.targets.Cluster {
		p.wantCRBs = binding.ClusterRoleBindings(si, p.template.Name, p.roles, subj)
	} else {
		p.wantRBs = binding.RoleBindings(si, p.template.Name, p.roles, subj, p.targets.Namespaces)
	}
	if p.existingRBs, p.existingCRBs, err = r.existingBindings(ctx, si.Name); err != nil {
		return nil, err
	}
	p.withholdAhead()
	keep := binding.Keep(si.Name, append(binding.Objects(p.wantRBs), binding.Objects(p.wantCRBs)...), p.targets, p.pending)
	p.staleRBs = binding.Stale(p.existingRBs, keep, p.targets)
	p.staleCRBs = binding.Stale(p.existingCRBs, keep, p.targets)
	if sa := si.Spec.ServiceAccount; sa != nil {
		p.attenuated = true
		if p.ceiling, err = r.ceilings(ctx, *sa, p); err != nil {
			return nil, err
		}
		p.ceiling.annotate(p)
	}
	return p, nil
}

// resolve reads the template, checks the spec and finds the targets. A
// SpecError is the user's to fix; an error is retried.
func (r *Reconciler) resolve(ctx context.Context, si *oriav1alpha1.ScopeInstance, nss []binding.Namespace, recreated []string) (*plan, *binding.SpecError, error) {
	if _, serr := binding.Selector(si.Spec); serr != nil {
		return nil, serr, nil
	}
	t := &oriav1alpha1.ScopeTemplate{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: si.Spec.ScopeTemplateName}, t); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &binding.SpecError{Reason: oriav1alpha1.ReasonTemplateNotFound, Message: fmt.Sprintf(
				"ScopeTemplate %q does not exist; existing bindings are kept until it does or the instance is deleted", si.Spec.ScopeTemplateName)}, nil
		}
		return nil, nil, fmt.Errorf("reading ScopeTemplate %q: %w", si.Spec.ScopeTemplateName, err)
	}
	if serr := binding.ValidateTemplate(t); serr != nil {
		return nil, &binding.SpecError{Reason: oriav1alpha1.ReasonTemplateInvalid, Message: fmt.Sprintf(
			"ScopeTemplate %q is not valid (%s: %s); existing bindings are kept until it is fixed", t.Name, serr.Reason, serr.Message)}, nil
	}
	p := &plan{template: t, recheck: r.recheck()}
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

// existingBindings returns the cached bindings of the named instance. They
// are the cache's own objects, read-only: the engine copies an object before
// it changes it (5,000 bindings per reconcile at scale, never copied).
func (r *Reconciler) existingBindings(ctx context.Context, instance string) ([]*rbacv1.RoleBinding, []*rbacv1.ClusterRoleBinding, error) {
	value := names.LabelValue(instance)
	var rbs []*rbacv1.RoleBinding
	var crbs []*rbacv1.ClusterRoleBinding
	var err error
	if r.Bindings != nil {
		rbs, crbs, err = r.Bindings.List(value)
	} else {
		rbs, crbs, err = listBindings(ctx, r.Client, value)
	}
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

// listBindings lists the bindings labelled for an instance through c, for a
// Reconciler without Bindings (tests around a wrapped client).
func listBindings(ctx context.Context, c client.Reader, value string) ([]*rbacv1.RoleBinding, []*rbacv1.ClusterRoleBinding, error) {
	sel := []client.ListOption{client.MatchingLabels{oriav1alpha1.LabelScopeInstance: value}, client.UnsafeDisableDeepCopy}
	var rbl rbacv1.RoleBindingList
	if err := c.List(ctx, &rbl, sel...); err != nil {
		return nil, nil, err
	}
	var crbl rbacv1.ClusterRoleBindingList
	if err := c.List(ctx, &crbl, sel...); err != nil {
		return nil, nil, err
	}
	rbs := make([]*rbacv1.RoleBinding, len(rbl.Items))
	for i := range rbl.Items {
		rbs[i] = &rbl.Items[i]
	}
	crbs := make([]*rbacv1.ClusterRoleBinding, len(crbl.Items))
	for i := range crbl.Items {
		crbs[i] = &crbl.Items[i]
	}
	return rbs, crbs, nil
}
