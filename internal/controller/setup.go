// Package controller registers oria's controllers; each lives in its own
// package below this one.
package controller

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/operator-framework/oria/internal/controller/extension"
	"github.com/operator-framework/oria/internal/controller/orphans"
	"github.com/operator-framework/oria/internal/controller/rbacpolicy"
	"github.com/operator-framework/oria/internal/controller/scopeinstance"
	"github.com/operator-framework/oria/internal/controller/scopetemplate"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/lookup"
	"github.com/operator-framework/oria/internal/manager"
	"github.com/operator-framework/oria/internal/metrics"
)

// SetupAll registers every oria controller with mgr.
func SetupAll(mgr ctrl.Manager, opts manager.Options) error {
	// One view of the API server's discovery for the controllers that tell
	// cluster-scoped APIs from namespaced ones.
	scopes, err := lookup.NewAPIScopesForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	// One cache of bundle-provided ClusterRoles for the two controllers
	// that read them.
	bundleRoles, err := manager.NewBundleRoleCache(mgr)
	if err != nil {
		return err
	}
	if err := lookup.SetupIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	// One write engine for the controllers: their writes share its
	// tokens (engine.MaxInFlight) and are counted in oria's metrics.
	eng := engine.New(metrics.ObserveWrites)
	for _, setup := range []func() error{
		func() error {
			return extension.SetupWithManager(mgr, extension.Options{
				DefaultMode: opts.DefaultRBACMode, MaxConcurrentReconciles: opts.MaxConcurrentReconciles, APIScopes: scopes, BundleRoles: bundleRoles, Engine: eng})
		},
		func() error {
			return rbacpolicy.SetupWithManager(mgr, rbacpolicy.Options{
				DefaultMode: opts.DefaultRBACMode, MaxConcurrentReconciles: opts.MaxConcurrentReconciles, APIScopes: scopes, BundleRoles: bundleRoles, Engine: eng})
		},
		func() error {
			return scopetemplate.SetupWithManager(mgr, scopetemplate.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles, Engine: eng})
		},
		func() error {
			return scopeinstance.SetupWithManager(mgr, scopeinstance.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles, Engine: eng})
		},
		// The sweep: what oria created whose owner is gone is deleted, at
		// start, at takeover and when seen.
		func() error {
			return orphans.SetupWithManager(mgr, orphans.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles, Engine: eng})
		},
	} {
		if err := setup(); err != nil {
			return err
		}
	}
	return nil
}
