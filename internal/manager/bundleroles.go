package manager

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/lookup"
	"github.com/operator-framework/oria/internal/olm"
)

// BundleRoleCacheOptions configures the cache of bundle-provided
// ClusterRoles: metadata only, and only ClusterRoles operator-controller
// installed for a ClusterExtension (a few per extension). oria's main cache
// holds only oria's own RBAC objects; this one lets the extension
// controller see the bundle's roles (whose names it must not generate, and
// on which it owns one label in Legacy mode) without reading the API server.
// managedFields are kept: they say which labels oria's field manager owns.
func BundleRoleCacheOptions(c cache.Options) cache.Options {
	c.ByObject = map[client.Object]cache.ByObject{
		lookup.ClusterRoleMetadata(): {Label: olm.InstalledByExtension()},
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
