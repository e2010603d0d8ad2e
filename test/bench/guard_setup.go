package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/testutil"
)

// setupGuard creates the delegated user's rights, the namespaces, the
// extension and the two objects the series write (as the user: both
// creates pass the guard). Not timed.
func (b *bench) setupGuard(ctx context.Context, as client.Client, n int) (*oriav1alpha1.ScopeInstance, *oriav1alpha1.RBACPolicy, error) {
	setup := map[string]string{labelGuard: "setup"}
	ns := guardNamespaces(n)
	b.logf("guard: creating %d namespaces, user %s (admin in each), extension %s (FineGrained, %d APIs)", len(ns), guardUser, guardExtension, guardAPIs)
	if err := parallel(ctx, setupWorkers, len(ns), func(ctx context.Context, i int) error {
		if err := b.admin.Create(ctx, testutil.Namespace(ns[i], map[string]string{labelGuardSlot: guardSlot(i, n)})); err != nil {
			return err
		}
		return b.admin.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: guardName + "-admin", Namespace: ns[i], Labels: setup},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
			Subjects:   []rbacv1.Subject{testutil.User(guardUser)},
		})
	}); err != nil {
		return nil, nil, fmt.Errorf("creating namespaces: %w", err)
	}
	delegate := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: guardUser, Labels: setup},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{oriav1alpha1.GroupVersion.Group},
			Resources: []string{"scopetemplates", "scopeinstances", "rbacpolicies"},
			Verbs:     []string{"create", "update", "patch"},
		}},
	}
	objs := []client.Object{delegate, clusterRoleBinding(guardUser, guardUser, setup), testutil.ClusterExtension(guardExtension, oriav1alpha1.RBACModeFineGrained)}
	var crdNames []string
	for _, crd := range guardCRDs() {
		objs = append(objs, crd)
		crdNames = append(crdNames, crd.Name)
	}
	for _, o := range objs {
		if err := b.admin.Create(ctx, o); err != nil {
			return nil, nil, fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	// oria generates the extension's roles (FineGrained); the user is
	// given its -view and -view-crdview roles cluster-wide.
	roles := guardRoles(crdNames)
	if err := b.waitRoles(ctx, roles); err != nil {
		return nil, nil, err
	}
	for _, role := range roles {
		if err := b.admin.Create(ctx, clusterRoleBinding(guardName+"-"+role, role, setup)); err != nil {
			return nil, nil, err
		}
	}
	devs := rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: guardGroup}
	tmpl := testutil.ScopeTemplate(guardName, []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}, {Name: "edit"}}, devs)
	if err := b.admin.Create(ctx, tmpl); err != nil {
		return nil, nil, fmt.Errorf("creating ScopeTemplate: %w", err)
	}
	si := &oriav1alpha1.ScopeInstance{
		ObjectMeta: metav1.ObjectMeta{Name: guardName},
		Spec:       oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: guardName, Namespaces: slices.Clone(ns[:n])},
	}
	apis := make([]oriav1alpha1.APIRef, len(crdNames))
	for i, crd := range crdNames {
		plural, group := names.SplitCRDName(crd)
		apis[i] = oriav1alpha1.APIRef{Group: group, Resource: plural}
	}
	p := &oriav1alpha1.RBACPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: guardName},
		Spec: oriav1alpha1.RBACPolicySpec{
			ExtensionName:     guardExtension,
			Access:            oriav1alpha1.AccessView,
			Subjects:          []rbacv1.Subject{devs},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{labelGuardSlot: "a"}},
			APIs:              apis,
		},
	}
	for _, o := range []client.Object{si, p} {
		t0 := time.Now()
		err := as.Create(ctx, o)
		switch {
		case err == nil:
			b.logf("guard: %s created %T %s through the guard in %s", guardUser, o, o.GetName(), time.Since(t0).Round(time.Millisecond))
		case apierrors.IsForbidden(err) || apierrors.IsInternalError(err):
			// The guard refused (or could not finish its check in time):
			// the object is created by the admin instead, so that the
			// other series can still be measured; the user's writes of it
			// then show the refusal in their row.
			b.warn("guard: %s's create of %T %s was refused after %s: %s; created as admin instead",
				guardUser, o, o.GetName(), time.Since(t0).Round(time.Millisecond), shorten(err.Error(), 300))
			if err := b.admin.Create(ctx, o); err != nil {
				return nil, nil, fmt.Errorf("creating %T %s as admin: %w", o, o.GetName(), err)
			}
		default:
			return nil, nil, fmt.Errorf("%s creating %T %s: %w", guardUser, o, o.GetName(), err)
		}
	}
	return si, p, b.settle(ctx, "after the guard's setup")
}

func clusterRoleBinding(name, role string, labels map[string]string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{testutil.User(guardUser)},
	}
}

// waitRoles waits until the ClusterRoles exist.
func (b *bench) waitRoles(ctx context.Context, roles []string) error {
	deadline := time.Now().Add(b.cfg.timeout)
	for _, role := range roles {
		for {
			err := b.admin.Get(ctx, client.ObjectKey{Name: role}, &rbacv1.ClusterRole{})
			if err == nil {
				break
			}
			if !apierrors.IsNotFound(err) || time.Now().After(deadline) {
				return fmt.Errorf("waiting for ClusterRole %s: %w", role, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// aggregateBuiltinRoles gives the built-in admin, edit and view roles the
// rules that kube-controller-manager's aggregation controller would give
// them, from Kubernetes' own system:aggregate-to-* roles (and view's into
// edit, edit's into admin), when they have
// none: the benchmark's control plane runs no controller manager (its
// garbage collector would delete the floors' objects), so they are empty,
// and a guard checking an empty role checks nothing. Only Kubernetes' own
// roles are aggregated, not those oria labels in Legacy mode. It returns
// what puts them back as they were.
func (b *bench) aggregateBuiltinRoles(ctx context.Context) (func(context.Context) error, error) {
	var filled []string
	for _, name := range builtinAggregated {
		cr := &rbacv1.ClusterRole{}
		if err := b.admin.Get(ctx, client.ObjectKey{Name: name}, cr); err != nil {
			return nil, err
		}
		if cr.AggregationRule == nil || len(cr.Rules) > 0 {
			continue
		}
		var rules []rbacv1.PolicyRule
		for _, sel := range cr.AggregationRule.ClusterRoleSelectors {
			s, err := metav1.LabelSelectorAsSelector(&sel)
			if err != nil {
				return nil, err
			}
			list := &rbacv1.ClusterRoleList{}
			if err := b.admin.List(ctx, list, client.MatchingLabelsSelector{Selector: s}); err != nil {
				return nil, err
			}
			slices.SortFunc(list.Items, func(a, b rbacv1.ClusterRole) int { return strings.Compare(a.Name, b.Name) })
			for _, src := range list.Items {
				if !strings.HasPrefix(src.Name, "system:aggregate-to-") && !slices.Contains(builtinAggregated, src.Name) {
					continue
				}
				for _, rule := range src.Rules {
					if !slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(r, rule) }) {
						rules = append(rules, rule)
					}
				}
			}
		}
		cr.Rules = rules
		if err := b.admin.Update(ctx, cr); err != nil {
			return nil, fmt.Errorf("aggregating ClusterRole %s: %w", name, err)
		}
		b.logf("guard: ClusterRole %s given the %d rules of Kubernetes' system:aggregate-to-* roles (%d permissions in a namespace), as the aggregation controller would", name, len(rules), len(expandCount(rules)))
		filled = append(filled, name)
	}
	return func(ctx context.Context) error {
		var errs []error
		for _, name := range filled {
			cr := &rbacv1.ClusterRole{}
			if err := b.admin.Get(ctx, client.ObjectKey{Name: name}, cr); err != nil {
				errs = append(errs, err)
				continue
			}
			cr.Rules = nil
			errs = append(errs, b.admin.Update(ctx, cr))
		}
		return errors.Join(errs...)
	}, nil
}

// expandCount lists the distinct group/resource/verb/name combinations of
// rules: the permissions the guard asks one SubjectAccessReview each about
// for a user who may not "bind" the role (authz.Expand, in a namespace).
func expandCount(rules []rbacv1.PolicyRule) map[string]bool {
	out := map[string]bool{}
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			continue
		}
		resourceNames := r.ResourceNames
		if len(resourceNames) == 0 {
			resourceNames = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					for _, n := range resourceNames {
						out[g+"/"+res+"/"+v+"/"+n] = true
					}
				}
			}
		}
	}
	return out
}

// cleanGuard deletes what the scenario created (as admin; the guard does
// not check deletes) and puts the built-in roles back. The namespaces stay
// Terminating: the benchmark runs no namespace controller.
func (b *bench) cleanGuard(ctx context.Context, n int, restoreRoles func(context.Context) error) error {
	b.logf("guard: deleting the scenario's objects")
	var errs []error
	del := func(o client.Object) {
		if err := client.IgnoreNotFound(b.admin.Delete(ctx, o)); err != nil {
			errs = append(errs, err)
		}
	}
	del(&oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: guardName}})
	del(&oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: guardName}})
	del(&oriav1alpha1.ScopeTemplate{ObjectMeta: metav1.ObjectMeta{Name: guardName}})
	// What oria compiled from the policy (owned by it; no garbage
	// collector runs).
	compiled := client.MatchingLabels{oriav1alpha1.LabelRBACPolicy: names.LabelValue(guardName)}
	errs = append(errs,
		b.admin.DeleteAllOf(ctx, &oriav1alpha1.ScopeInstance{}, compiled),
		b.admin.DeleteAllOf(ctx, &oriav1alpha1.ScopeTemplate{}, compiled))
	ns := guardNamespaces(n)
	errs = append(errs, parallel(ctx, setupWorkers, len(ns), func(ctx context.Context, i int) error {
		if err := b.admin.DeleteAllOf(ctx, &rbacv1.RoleBinding{}, client.InNamespace(ns[i])); err != nil {
			return err
		}
		return client.IgnoreNotFound(b.admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns[i]}}))
	}))
	setup := client.MatchingLabels{labelGuard: "setup"}
	errs = append(errs,
		b.admin.DeleteAllOf(ctx, &rbacv1.ClusterRoleBinding{}, setup),
		b.admin.DeleteAllOf(ctx, &rbacv1.ClusterRole{}, setup))
	del(testutil.ClusterExtension(guardExtension, ""))
	var crdNames []string
	for _, crd := range guardCRDs() {
		del(crd)
		crdNames = append(crdNames, crd.Name)
	}
	// The extension's generated roles (owned by the extension).
	for _, crd := range crdNames {
		for _, kind := range names.RoleKinds {
			del(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: names.ExtensionRole(crd, kind)}})
		}
	}
	if restoreRoles != nil {
		errs = append(errs, restoreRoles(ctx))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cleaning up the guard scenario: %w", err)
	}
	return b.settle(ctx, "after the guard scenario")
}
