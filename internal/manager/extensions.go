package manager

import (
	"context"
	"fmt"
	"maps"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/olm"
)

// ExtensionCRDs returns the sorted names of the live CRDs operator-controller
// installed for the ClusterExtension named extension, from r (a manager's
// cache, which holds CRDs as metadata only: see CacheOptions). It is the one
// definition of "the APIs of an extension" for the controllers and the
// admission guard.
func ExtensionCRDs(ctx context.Context, r client.Reader, extension string) ([]string, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(CRDMetadata().GroupVersionKind().GroupVersion().WithKind("CustomResourceDefinitionList"))
	if err := r.List(ctx, list, client.MatchingLabels(ExtensionOwnerLabels(extension))); err != nil {
		return nil, fmt.Errorf("listing the CustomResourceDefinitions of ClusterExtension %q: %w", extension, err)
	}
	out := make([]string, 0, len(list.Items))
	for _, crd := range list.Items {
		if crd.DeletionTimestamp.IsZero() {
			out = append(out, crd.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// ExtensionOwnerLabels are the labels operator-controller puts on what it
// installs for the named ClusterExtension (olm.OwnerLabels).
func ExtensionOwnerLabels(extension string) map[string]string { return olm.OwnerLabels(extension) }

// ClusterRoleMetadata returns an empty metadata-only ClusterRole, the type
// of the bundle-role cache.
func ClusterRoleMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("ClusterRole"))
	return m
}

// BundleRoleCacheOptions configures the cache of bundle-provided
// ClusterRoles: metadata only, and only ClusterRoles operator-controller
// installed for a ClusterExtension (a few per extension). oria's main cache
// holds only oria's own RBAC objects; this one lets the extension
// controller see the bundle's roles (whose names it must not generate, and
// on which it owns one label in Legacy mode) without reading the API server.
// managedFields are kept: they say which labels oria's field manager owns.
func BundleRoleCacheOptions(c cache.Options) cache.Options {
	c.ByObject = map[client.Object]cache.ByObject{
		ClusterRoleMetadata(): {Label: olm.InstalledByExtension()},
	}
	c.DefaultTransform = nil
	return c
}

// NewBundleRoleCache returns the cache of bundle-provided ClusterRoles (see
// BundleRoleCacheOptions), added to mgr: one for the controllers that read
// bundle roles (the extension controller, which aggregates them, and the
// RBACPolicy controller, which binds them).
func NewBundleRoleCache(mgr ctrl.Manager) (cache.Cache, error) {
	watchClient, err := WatchHTTPClient(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	c, err := cache.New(mgr.GetConfig(), BundleRoleCacheOptions(cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: watchClient,
	}))
	if err != nil {
		return nil, fmt.Errorf("creating the bundle-provided ClusterRole cache: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, fmt.Errorf("adding the bundle-provided ClusterRole cache: %w", err)
	}
	return c, nil
}

// ExtensionChanged passes the ClusterExtension events oria acts on: create,
// delete, and updates that change the spec (generation), the RBAC mode
// annotation (the only annotation oria reads), the labels or the deletion
// timestamp. Status-only writes (operator-controller's conditions, oria's
// own RBACManaged condition) and other annotations (kubectl's
// last-applied-configuration, other tools') do not requeue anything.
func ExtensionChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld, e.ObjectNew
			return o.GetGeneration() != n.GetGeneration() ||
				!annotationEqual(o, n, oriav1alpha1.AnnotationRBACMode) ||
				!maps.Equal(o.GetLabels(), n.GetLabels()) ||
				!o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp())
		},
	}
}

// annotationEqual reports whether a and b have the same value for the
// annotation key, or both lack it.
func annotationEqual(a, b client.Object, key string) bool {
	va, oka := a.GetAnnotations()[key]
	vb, okb := b.GetAnnotations()[key]
	return oka == okb && va == vb
}
