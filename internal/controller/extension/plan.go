package extension

import (
	"context"
	"fmt"
	"maps"
	"slices"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/lookup"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/olm"
	"github.com/operator-framework/oria/internal/ownership"
)

// plan is what one reconcile of an extension read and decided: everything
// the writes and the condition are computed from.
type plan struct {
	ext       Extension
	mode      oriav1alpha1.RBACMode
	annotated bool
	// annotation is the rbac-mode annotation's value.
	annotation string
	// valid is false when the annotation holds an unknown mode: nothing is
	// changed then.
	valid bool
	// crds are the extension's CRD names, sorted; clusterScoped those of
	// them whose API is cluster-scoped (known in Legacy mode only, where it
	// changes what the aggregated roles reach).
	crds          []string
	clusterScoped []string
	// scopesPending is set when discovery does not know every CRD yet.
	scopesPending bool
	// bundle are the bundle-provided roles holding generated names.
	bundle map[string]BundleRole
	// tooBroad are the sentences reporting the bundle roles that reach
	// beyond the extension's APIs, in role name order (bundle.go).
	tooBroad []string
	// desired are the roles oria generates; cached the cached ClusterRoles
	// at their names (oria's, of any extension).
	desired []*rbacv1.ClusterRole
	cached  map[types.NamespacedName]*rbacv1.ClusterRole
	// stale are oria's roles of this extension that are no longer desired.
	stale []*rbacv1.ClusterRole
	// bundleApplies are the label changes on bundle roles, in name order.
	bundleApplies []runtime.ApplyConfiguration
	bundleNames   []string
	// handOvers are the roles oria generated that the bundle adopted since
	// (adopted.go), in name order: oria gives up its hold on them first,
	// and applies nothing else to them in the same reconcile.
	handOvers []engine.HandOver
}

// Gather reads what a reconcile of ce needs, from the caches only, and
// decides the writes with the pure functions of roles.go.
func (r *Reconciler) Gather(ctx context.Context, ce *ocv1.ClusterExtension) (*plan, error) {
	annotation, annotated := ce.Annotations[oriav1alpha1.AnnotationRBACMode]
	mode, valid := oriav1alpha1.EffectiveRBACMode(ce.Annotations, r.opts.DefaultMode)
	p := &plan{ext: Extension{Name: ce.Name, UID: ce.UID, Namespace: ce.Spec.Namespace}, mode: mode, annotated: annotated, annotation: annotation, valid: valid}
	if !valid {
		return p, nil
	}
	var err error
	if p.crds, err = lookup.ExtensionCRDs(ctx, r.Client, ce.Name); err != nil {
		return nil, err
	}
	if mode == oriav1alpha1.RBACModeLegacy && len(p.crds) > 0 {
		var unknown []string
		if p.clusterScoped, unknown, err = r.APIScopes.ClusterScoped(p.crds); err != nil {
			return nil, err
		}
		p.scopesPending = len(unknown) > 0
	}
	bundle, err := r.bundleRoles(ctx, ce.Name)
	if err != nil {
		return nil, err
	}
	p.bundle = BundleRoles(bundle, p.crds)
	if err := r.judgeBundleRoles(ctx, p); err != nil {
		return nil, err
	}
	bundleNames := map[string]bool{}
	for name := range p.bundle {
		bundleNames[name] = true
	}
	p.desired = DesiredRoles(p.ext, p.crds, mode, bundleNames)
	p.cached = map[types.NamespacedName]*rbacv1.ClusterRole{}
	for _, want := range p.desired {
		cur := &rbacv1.ClusterRole{}
		switch err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), cur); {
		case err == nil:
			p.cached[client.ObjectKeyFromObject(want)] = cur
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading ClusterRole %q from the cache: %w", want.Name, err)
		}
	}
	oriaRoles, err := r.extensionRoles(ctx, ce.Name)
	if err != nil {
		return nil, err
	}
	p.stale = StaleRoles(oriaRoles, ce.Name, p.desired, bundleNames)
	for _, name := range slices.Sorted(maps.Keys(p.bundle)) {
		if ops := handOverPatch(p.bundle[name], keptLabel(p.bundle[name], mode)); ops != nil {
			p.handOvers = append(p.handOvers, engine.HandOver{Object: p.bundle[name].Object, Patch: ops})
			continue
		}
		if ac := BundleRoleApply(p.bundle[name], mode); ac != nil {
			p.bundleApplies = append(p.bundleApplies, ac)
			p.bundleNames = append(p.bundleNames, name)
		}
	}
	return p, nil
}

// bundleRoles lists the ClusterRoles operator-controller installed for the
// named extension, from the bundle-role cache.
func (r *Reconciler) bundleRoles(ctx context.Context, name string) ([]metav1.PartialObjectMetadata, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("ClusterRoleList"))
	if err := r.BundleRoles.List(ctx, list, client.MatchingLabels(olm.OwnerLabels(name))); err != nil {
		return nil, fmt.Errorf("listing the bundle-provided ClusterRoles of ClusterExtension %q: %w", name, err)
	}
	return list.Items, nil
}

// extensionRoles lists the cached roles labelled as oria's for the
// extension named name (the cache holds only oria's roles: managed-by label).
func (r *Reconciler) extensionRoles(ctx context.Context, name string) ([]rbacv1.ClusterRole, error) {
	list := &rbacv1.ClusterRoleList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{lookup.IndexExtensionRoles: names.LabelValue(name)}); err != nil {
		return nil, fmt.Errorf("listing the ClusterRoles of ClusterExtension %q: %w", name, err)
	}
	return list.Items, nil
}

// StaleRoles returns the roles of cached that oria generated for the
// extension named name and that are neither desired nor shipped by its
// bundle (bundle: the names the bundle-role cache shows): those oria
// deletes. A name the bundle ships is never stale, whatever the role cache
// still shows: the two caches are fed by two informers, and when Helm
// adopts a generated role the bundle-role cache may see the adoption
// before the role cache does, which still shows the role as oria's alone.
// Deleting it then would delete the bundle's role (Helm puts it back, but
// access lapses meanwhile).
func StaleRoles(cached []rbacv1.ClusterRole, name string, desired []*rbacv1.ClusterRole, bundle map[string]bool) []*rbacv1.ClusterRole {
	want := map[string]bool{}
	for _, d := range desired {
		want[d.Name] = true
	}
	var stale []*rbacv1.ClusterRole
	for i := range cached {
		cr := &cached[i]
		if !want[cr.Name] && !bundle[cr.Name] && ownership.ExtensionOwns(cr, name, "") && cr.DeletionTimestamp.IsZero() {
			stale = append(stale, cr)
		}
	}
	return stale
}
