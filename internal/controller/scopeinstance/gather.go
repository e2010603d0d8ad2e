package scopeinstance

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/ownership"
)

// Gather judges the instance's window at this instant and reads what the
// reconcile decides on (gathered), from the caches, the API server where
// the caches hold nothing; decide (decide.go) turns it into the plan.
// Outside its window it reads only the bindings and the gate to delete:
// expiry wins over everything else that may be wrong with the instance (a
// missing template, a spec error, a pending ceiling check), none of which
// is even read. An instance with a ceiling then asks its ServiceAccount
// about the roles ahead of what they grant (askCeiling, ceiling.go).
func (r *Reconciler) Gather(ctx context.Context, si *oriav1alpha1.ScopeInstance) (*plan, error) {
	g := gathered{si: si, now: r.Now(), recheck: r.recheck()}
	phase, _ := binding.InstanceWindow(si.Spec).At(g.now)
	bind := binds(si.Spec, phase)
	var err error
	if !binding.IsClusterWide(si.Spec) && (bind || phase == binding.WindowPending) {
		if g.namespaces, err = r.namespaces(ctx); err != nil {
			return nil, err
		}
	}
	if g.existing, err = r.existingBindings(si.Name); err != nil {
		return nil, err
	}
	if g.gate, g.squat, err = r.currentGate(ctx, si, bind && binding.Gated(si.Spec)); err != nil {
		return nil, err
	}
	if bind {
		if err := r.gatherSpec(ctx, &g); err != nil {
			return nil, err
		}
	}
	p := decide(g)
	if p.ceiling != nil {
		// The ServiceAccount's answer about the roles ahead of what they
		// grant is part of the plan: a question, before any write.
		if err := r.askCeiling(ctx, p); err != nil {
			return p, err
		}
	}
	return p, nil
}

// gatherSpec reads what the spec of an instance that binds depends on: its
// template, the template's inline roles, its ServiceAccount, the roles its
// gate copies, and, with a ceiling, what the other roles grant.
func (r *Reconciler) gatherSpec(ctx context.Context, g *gathered) error {
	si := g.si
	t := &oriav1alpha1.ScopeTemplate{}
	switch err := r.Client.Get(ctx, types.NamespacedName{Name: si.Spec.ScopeTemplateName}, t); {
	case apierrors.IsNotFound(err):
		t = nil
	case err != nil:
		return fmt.Errorf("reading ScopeTemplate %q: %w", si.Spec.ScopeTemplateName, err)
	}
	g.template = t
	valid := t != nil && binding.ValidateTemplate(t) == nil
	var inline, others []string
	if valid {
		g.inline = map[string]inlineRole{}
		for _, role := range binding.Roles(t) {
			if !role.Inline {
				others = append(others, role.Name)
				continue
			}
			inline = append(inline, role.Name)
			state, cr, err := r.inlineRoleState(ctx, t.Name, role.Name)
			if err != nil {
				return err
			}
			in := inlineRole{state: state}
			if cr != nil {
				in.rules = cr.Rules
			}
			g.inline[role.Name] = in
		}
	}
	var err error
	if g.serviceAccountMissing, err = r.serviceAccountMissing(ctx, si); err != nil {
		return err
	}
	// The roles a gate copies: the template's (gated), the gate's own.
	var copied []string
	if valid && binding.Gated(si.Spec) {
		copied = append(append(copied, inline...), others...)
	}
	if g.gate != nil {
		copied = append(copied, binding.GateRoles(g.gate)...)
	}
	if len(copied) > 0 {
		g.live = map[string][]rbacv1.PolicyRule{}
		for _, name := range copied {
			role, err := r.roles.Get(ctx, name)
			if err != nil {
				return err
			}
			if role != nil {
				g.live[name] = role.Rules
			}
		}
	}
	if si.Spec.ServiceAccount != nil {
		// What the ceiling decides on: the roles other than a valid
		// template's inline roles, its own and those existing bindings
		// name, from the API server (oria's cache holds only oria's).
		asked := others
		for _, b := range g.existing.Objects() {
			asked = append(asked, binding.RoleOf(b))
		}
		if g.ceilings, err = r.ceilingValues(ctx, asked, inline); err != nil {
			return err
		}
	}
	return nil
}

// ceilingValues returns the ceiling value of each of roles but skip: the
// hash of its rules, or binding.CeilingAbsent.
func (r *Reconciler) ceilingValues(ctx context.Context, roles, skip []string) (map[string]string, error) {
	out := map[string]string{}
	for _, name := range roles {
		if _, done := out[name]; done || name == "" || slices.Contains(skip, name) {
			continue
		}
		cr := &rbacv1.ClusterRole{}
		switch err := r.APIReader.Get(ctx, types.NamespacedName{Name: name}, cr); {
		case apierrors.IsNotFound(err):
			out[name] = binding.CeilingAbsent
		case err != nil:
			return nil, fmt.Errorf("reading ClusterRole %q: %w", name, err)
		default:
			out[name] = binding.CeilingHash(cr.Rules)
		}
	}
	return out, nil
}

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

// serviceAccountMissing reports whether the instance names a ceiling
// ServiceAccount that does not exist: nothing new is written for it then
// (existing bindings are kept), and the instance looks again later. One
// metadata-only read, for instances with a ceiling only.
func (r *Reconciler) serviceAccountMissing(ctx context.Context, si *oriav1alpha1.ScopeInstance) (bool, error) {
	sa := si.Spec.ServiceAccount
	if sa == nil {
		return false, nil
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ServiceAccount"))
	switch err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: sa.Namespace, Name: sa.Name}, m); {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading ServiceAccount %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	return false, nil
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
// (lookup.InstanceBindings.Of). They are the cache's own objects,
// read-only: the engine copies an object before it changes it (thousands
// of bindings per reconcile at scale, never copied).
func (r *Reconciler) existingBindings(instance string) (binding.Set, error) {
	return r.Bindings.Of(instance)
}

// currentGate returns the instance's gate as oria's cache shows it (nil
// when there is none), and, when squat is set, the description of a role
// that holds the gate's name without being this instance's: a role without
// oria's labels is not in the cache, so that takes a read of the API server
// while the gate does not exist (only a gated instance that binds, about to
// create its gate, asks; any other reconcile looks for a gate left over in
// the cache alone).
func (r *Reconciler) currentGate(ctx context.Context, si *oriav1alpha1.ScopeInstance, squat bool) (*rbacv1.ClusterRole, string, error) {
	name := binding.GateName(si.Name, string(si.UID))
	role := &rbacv1.ClusterRole{}
	err := r.Client.Get(ctx, types.NamespacedName{Name: name}, role)
	if apierrors.IsNotFound(err) && !squat {
		return nil, "", nil
	}
	if apierrors.IsNotFound(err) {
		// Not in oria's cache: absent, without oria's labels, or just
		// created and not seen yet.
		if err = r.APIReader.Get(ctx, types.NamespacedName{Name: name}, role); apierrors.IsNotFound(err) {
			return nil, "", nil
		}
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading ClusterRole %q: %w", name, err)
	}
	if !ownership.ControlledByUID(role, si.UID) {
		return nil, fmt.Sprintf("ClusterRole %q, the gate of this time-bound grant, exists and was not created by oria for this instance", name), nil
	}
	return role, "", nil
}
