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
	// What an earlier oria created without the label the caches filter on
	// is labelled once at start, so that its controllers see it.
	if err := manager.AddRelabel(mgr, &engine.Writer{Client: mgr.GetClient(), Engine: eng}); err != nil {
		return err
	}
	// What needs OLM v1's ClusterExtension API waits for it on a cluster
	// without it (manager.OLMGate): the extension controller, and the
	// RBACPolicy controller's watch of extensions (meanwhile its policies
	// report OLMNotInstalled); the rest is served at once.
	olmGate, err := manager.NewOLMGate(mgr, manager.OLMGateOptions{
		Waiting: "the ClusterExtension controller; RBACPolicies report OLMNotInstalled",
		Serving: "ScopeTemplates, ScopeInstances, the orphan sweep and the escalation guard",
		Observe: metrics.SetOLMAPIAvailable,
	})
	if err != nil {
		return err
	}
	for _, setup := range []func() error{
		func() error {
			return olmGate.Then(func() error {
				return extension.SetupWithManager(mgr, extension.Options{
					DefaultMode: opts.DefaultRBACMode, MaxConcurrentReconciles: opts.MaxConcurrentReconciles, APIScopes: scopes, BundleRoles: bundleRoles, Engine: eng})
			})
		},
		func() error {
			return rbacpolicy.SetupWithManager(mgr, rbacpolicy.Options{
				DefaultMode: opts.DefaultRBACMode, MaxConcurrentReconciles: opts.MaxConcurrentReconciles, APIScopes: scopes, BundleRoles: bundleRoles, Engine: eng,
				OLM: olmGate})
		},
		func() error {
			return scopetemplate.SetupWithManager(mgr, scopetemplate.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles, Engine: eng})
		},
		func() error {
			return scopeinstance.SetupWithManager(mgr, scopeinstance.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles, Engine: eng,
				ExpiryWarning: opts.ExpiryWarning})
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
