// Package controller registers oria's controllers; each lives in its own
// package below this one. What they share is built once, here (Shared),
// and passed in: a controller refuses to start without a dependency.
package controller

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/authz"
	"github.com/operator-framework/oria/internal/controller/accessrequest"
	"github.com/operator-framework/oria/internal/controller/extension"
	"github.com/operator-framework/oria/internal/controller/orphans"
	"github.com/operator-framework/oria/internal/controller/rbacpolicy"
	"github.com/operator-framework/oria/internal/controller/scopeinstance"
	"github.com/operator-framework/oria/internal/controller/scopetemplate"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/impersonate"
	"github.com/operator-framework/oria/internal/lookup"
	"github.com/operator-framework/oria/internal/manager"
	"github.com/operator-framework/oria/internal/metrics"
	"github.com/operator-framework/oria/internal/olm"
	"github.com/operator-framework/oria/internal/reconciler"
)

// SetupAll registers every oria controller with mgr.
//
// Each controller is set up with EnableWarmup: with leader election, a
// replica that does not lead starts its controllers' watches anyway (their
// informers list and watch, their handlers fill the queues), and only its
// workers wait until it leads. A takeover then starts reconciling at once
// instead of first registering every handler and replaying every cache
// (docs/benchmarks.md, the restart rows). It writes nothing early: oria
// writes only from a reconcile (through the engine), and workers start only
// on the leader; the handlers and the runnables that run on every replica
// (the API wait, the escalation guard's caches) only read, except the
// ScopeInstance standby, which only takes away: on a replica that does not
// lead it ends the access of a grant whose window has closed, when the
// leader has not (scopeinstance/standby.go). Without leader election it
// changes nothing.
func SetupAll(mgr ctrl.Manager, opts manager.Options) error {
	if err := lookup.SetupIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	s, err := NewShared(mgr, metrics.ObserveWrites)
	if err != nil {
		return err
	}
	// What an earlier oria created without the label the caches filter on
	// is labelled once at start, so that its controllers see it.
	if err := manager.AddRelabel(mgr, &engine.Writer{Client: mgr.GetClient(), Revoker: mgr.GetClient(), Engine: s.Engine}); err != nil {
		return err
	}
	orphanDeps, err := s.OrphansDeps(mgr)
	if err != nil {
		return err
	}
	workers := opts.MaxConcurrentReconciles
	for _, setup := range []func() error{
		func() error {
			return s.OLM.Then(func() error {
				return extension.SetupWithManager(mgr, s.ExtensionDeps(mgr), extension.Options{DefaultMode: opts.DefaultRBACMode, MaxConcurrentReconciles: workers})
			})
		},
		func() error {
			return rbacpolicy.SetupWithManager(mgr, s.RBACPolicyDeps(mgr), rbacpolicy.Options{DefaultMode: opts.DefaultRBACMode, MaxConcurrentReconciles: workers})
		},
		func() error {
			return scopetemplate.SetupWithManager(mgr, s.ScopeTemplateDeps(mgr), scopetemplate.Options{MaxConcurrentReconciles: workers})
		},
		func() error {
			deps := s.ScopeInstanceDeps(mgr)
			if err := scopeinstance.SetupWithManager(mgr, deps, scopeinstance.Options{MaxConcurrentReconciles: workers,
				ExpiryWarning: opts.ExpiryWarning}); err != nil {
				return err
			}
			// A closed window's access is ended by a replica that does not
			// lead, when the leader has not (scopeinstance/standby.go).
			return mgr.Add(scopeinstance.NewStandby(deps, mgr.GetCache(), mgr.Elected(), nil, 0))
		},
		// Eligible access: each AccessRequest's time-bound grant.
		func() error {
			return accessrequest.SetupWithManager(mgr, s.AccessRequestDeps(mgr), accessrequest.Options{MaxConcurrentReconciles: workers})
		},
		// The sweep: what oria created whose owner is gone is deleted, at
		// start, at takeover and when seen.
		func() error {
			return orphans.SetupWithManager(mgr, orphanDeps, orphans.Options{MaxConcurrentReconciles: workers})
		},
	} {
		if err := setup(); err != nil {
			return err
		}
	}
	return nil
}

// Shared is what the controllers of one manager share, each part built
// once (NewShared). Each controller's Deps are made from it and the
// manager (the *Deps methods); SetupAll registers them, and the
// controllers' integration suites build theirs the same way.
type Shared struct {
	// Engine is the one write engine: the controllers' writes share its
	// tokens (engine.MaxInFlight) and its observer.
	Engine *engine.Engine
	// APIScopes is one view of the API server's discovery for the
	// controllers that tell cluster-scoped APIs from namespaced ones.
	APIScopes *lookup.APIScopes
	// BundleRoles is one cache of bundle-provided ClusterRoles for the two
	// controllers that read them.
	BundleRoles cache.Cache
	// ForeignRoles caches the ClusterRoles that are not oria's, for the
	// gates of time-bound grants that copy them.
	ForeignRoles cache.Cache
	// Bindings looks up an instance's cached bindings by index.
	Bindings *lookup.InstanceBindings
	// Impersonators are the clients that write as a ceiling's
	// ServiceAccount, one per ServiceAccount for the life of the process.
	Impersonators *impersonate.Clients
	// Authz asks a ceiling's ServiceAccount about new rules, with
	// SubjectAccessReviews.
	Authz *authz.Authorizer
	// OLM holds back what needs OLM v1's ClusterExtension API on a cluster
	// without it (olm.APIWait): the extension controller, and the
	// RBACPolicy controller's watch of extensions (meanwhile its policies
	// report OLMNotInstalled); the rest is served at once.
	OLM *olm.APIWait
}

// NewShared builds what the controllers of mgr share; observe sees every
// write of its Engine (metrics.ObserveWrites in oria). The field indexes
// are not its part: manager.New's caller registers them once
// (lookup.SetupIndexes).
func NewShared(mgr ctrl.Manager, observe engine.Observer) (*Shared, error) {
	s := &Shared{Engine: engine.New(observe)}
	var err error
	if s.APIScopes, err = lookup.NewAPIScopesForConfig(mgr.GetConfig()); err != nil {
		return nil, err
	}
	if s.BundleRoles, err = manager.NewBundleRoleCache(mgr); err != nil {
		return nil, err
	}
	if s.ForeignRoles, err = manager.NewForeignRoleCache(mgr); err != nil {
		return nil, err
	}
	if s.Bindings, err = lookup.NewInstanceBindings(context.Background(), mgr.GetCache()); err != nil {
		return nil, err
	}
	if s.Impersonators, err = impersonate.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()}); err != nil {
		return nil, err
	}
	if s.Authz, err = authz.New(mgr.GetClient(), mgr.GetAPIReader(), authz.NoRules{}); err != nil {
		return nil, err
	}
	if s.OLM, err = olm.NewAPIWait(mgr, olm.APIWaitOptions{
		Waiting: "the ClusterExtension controller; RBACPolicies report OLMNotInstalled",
		Serving: "ScopeTemplates, ScopeInstances, the orphan sweep and the escalation guard",
		Observe: metrics.SetOLMAPIAvailable,
	}); err != nil {
		return nil, err
	}
	return s, nil
}

// base is the reconciler.Base of the controller whose Events are reported
// as recorder, with a Memo of its own.
func (s *Shared) base(mgr ctrl.Manager, recorder string) reconciler.Base {
	return reconciler.Base{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: reconciler.LimitEvents(mgr.GetEventRecorder(recorder)), Engine: s.Engine, Memo: engine.NewMemo()}
}

// ExtensionDeps are the extension controller's dependencies on mgr.
func (s *Shared) ExtensionDeps(mgr ctrl.Manager) extension.Deps {
	return extension.Deps{Base: s.base(mgr, extension.RecorderName), BundleRoles: s.BundleRoles, APIScopes: s.APIScopes}
}

// RBACPolicyDeps are the RBACPolicy controller's dependencies on mgr.
func (s *Shared) RBACPolicyDeps(mgr ctrl.Manager) rbacpolicy.Deps {
	return rbacpolicy.Deps{Base: s.base(mgr, rbacpolicy.RecorderName), APIScopes: s.APIScopes, BundleRoles: s.BundleRoles, OLM: s.OLM}
}

// AccessRequestDeps are the AccessRequest controller's dependencies on mgr.
func (s *Shared) AccessRequestDeps(mgr ctrl.Manager) accessrequest.Deps {
	return accessrequest.Deps{Base: s.base(mgr, accessrequest.RecorderName), BundleRoles: s.BundleRoles}
}

// ScopeTemplateDeps are the ScopeTemplate controller's dependencies on mgr.
func (s *Shared) ScopeTemplateDeps(mgr ctrl.Manager) scopetemplate.Deps {
	return scopetemplate.Deps{Base: s.base(mgr, scopetemplate.RecorderName), Bindings: s.Bindings}
}

// ScopeInstanceDeps are the ScopeInstance controller's dependencies on mgr.
func (s *Shared) ScopeInstanceDeps(mgr ctrl.Manager) scopeinstance.Deps {
	return scopeinstance.Deps{Base: s.base(mgr, scopeinstance.RecorderName), Bindings: s.Bindings, Impersonators: s.Impersonators, Authz: s.Authz,
		ForeignRoles: s.ForeignRoles}
}

// OrphansDeps are the sweep's dependencies on mgr.
func (s *Shared) OrphansDeps(mgr ctrl.Manager) (orphans.Deps, error) {
	owners, err := orphans.NewCachedOwners(context.Background(), mgr.GetCache())
	if err != nil {
		return orphans.Deps{}, err
	}
	return orphans.Deps{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Engine: s.Engine, Owners: owners, Bindings: s.Bindings}, nil
}
