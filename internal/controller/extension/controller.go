// Package extension generates ClusterRoles for every API a ClusterExtension
// provides and, in Legacy mode, aggregates them into the built-in admin, edit
// and view ClusterRoles. The mode comes from the rbac-mode annotation on the
// ClusterExtension (or the controller's default); the result is reported on
// the ClusterExtension as oria's own RBACManaged condition.
//
// A reconcile gathers what it needs from the caches into a plan (plan.go),
// decides the roles with pure functions (roles.go), writes through the write
// engine (package engine) and computes the condition with a pure function of
// the plan and the outcome (status.go).
package extension

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/lookup"
	"github.com/operator-framework/oria/internal/olm"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/reconciler"
	"github.com/operator-framework/oria/internal/watch"
)

// ControllerName names the controller in logs and metrics; RecorderName is
// the reporting controller of its Events.
const (
	ControllerName = "clusterextension-rbac"
	RecorderName   = "oria-" + ControllerName
)

// DefaultRecheckInterval is how often an extension with a conflicting
// ClusterRole is reconciled again. Conflicting roles are not oria's and so
// not in oria's cache: nothing tells oria when one goes away.
const DefaultRecheckInterval = time.Minute

// DefaultMaxConcurrentReconciles is how many extensions are reconciled at
// once. An extension's reconcile is small (a few roles per API, one
// condition) and mostly waits: its roles' creates, then its status write,
// before the worker takes the next extension. With 4 workers, as the other
// controllers have, a mode switch of many extensions ran well behind a
// plain client on the same API server; with 16, level with it
// (docs/benchmarks.md, History, f299d28).
// The API server's load
// stays bounded by engine.MaxInFlight, whatever the number of workers.
const DefaultMaxConcurrentReconciles = 16

// Options configure the controller.
type Options struct {
	// DefaultMode applies to ClusterExtensions without the rbac-mode
	// annotation.
	DefaultMode oriav1alpha1.RBACMode
	// MaxConcurrentReconciles is the number of extensions reconciled at
	// once (DefaultMaxConcurrentReconciles when 0).
	MaxConcurrentReconciles int
	// ConflictRecheckInterval: see DefaultRecheckInterval; zero means the
	// default.
	ConflictRecheckInterval time.Duration
}

// Deps are what the controller is built from, each required (New refuses
// a missing one): controller.SetupAll builds them once per manager, and
// the integration tests build theirs with the same constructors.
type Deps struct {
	// Base: the clients (Client reads the cache: ClusterExtensions,
	// oria-labelled ClusterRoles, metadata of CRDs installed for
	// extensions; APIReader a same-name ClusterRole oria did not create),
	// Events on the ClusterExtension, the engine and the Memo.
	reconciler.Base
	// BundleRoles is the cache of bundle-provided ClusterRoles, as
	// metadata (manager.NewBundleRoleCache), shared with the RBACPolicy
	// controller.
	BundleRoles cache.Cache
	// APIScopes tells cluster-scoped APIs from namespaced ones
	// (lookup.NewAPIScopesForConfig), shared with the RBACPolicy
	// controller.
	APIScopes *lookup.APIScopes
}

// Reconciler reconciles the ClusterRoles of one ClusterExtension and its
// RBACManaged condition. Make one with New.
type Reconciler struct {
	Deps
	opts Options
}

// New returns the Reconciler of d and o, or an error naming what is
// missing or wrong.
func New(d Deps, o Options) (*Reconciler, error) {
	if _, ok := oriav1alpha1.ParseRBACMode(string(o.DefaultMode)); !ok {
		return nil, fmt.Errorf("invalid default RBAC mode %q", o.DefaultMode)
	}
	if err := reconciler.Check("the ClusterExtension controller", d.Base,
		reconciler.Need{Name: "the bundle-role cache", Set: d.BundleRoles != nil}, reconciler.Need{Name: "the API scopes", Set: d.APIScopes != nil}); err != nil {
		return nil, err
	}
	o.ConflictRecheckInterval = cmp.Or(o.ConflictRecheckInterval, DefaultRecheckInterval)
	return &Reconciler{Deps: d, opts: o}, nil
}

// SetupWithManager builds the controller (New) and registers it with mgr.
func SetupWithManager(mgr ctrl.Manager, d Deps, o Options) error {
	r, err := New(d, o)
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&ocv1.ClusterExtension{}, builder.WithPredicates(watch.ExtensionChanged())).
		// Generated roles are controlled by their extension: a deleted or
		// edited role brings its extension back for repair.
		Watches(&rbacv1.ClusterRole{}, watch.EnqueueController(ocv1.GroupVersion.Group, ocv1.ClusterExtensionKind,
			r.Memo.Of(roleKind.Name))).
		// An upgrade adds or removes CRDs, and bundle-provided roles: each
		// belongs to the extension its owner label names (old and new
		// owner on an update). Both are watched as metadata only.
		WatchesMetadata(lookup.CRDMetadata(), handler.EnqueueRequestsFromMapFunc(toExtension)).
		WatchesRawSource(source.Kind(d.BundleRoles, lookup.ClusterRoleMetadata(),
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, o *metav1.PartialObjectMetadata) []reconcile.Request {
				return toExtension(ctx, o)
			}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: cmp.Or(o.MaxConcurrentReconciles, DefaultMaxConcurrentReconciles),
			EnableWarmup: ptr.To(true)}). // a standby's watches run before it leads (controller.SetupAll)
		Complete(r)
}

// toExtension maps an object operator-controller installed to its
// ClusterExtension.
func toExtension(_ context.Context, o client.Object) []reconcile.Request {
	ext := olm.ExtensionOf(o)
	if ext == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: ext}}}
}

// +kubebuilder:rbac:groups=olm.operatorframework.io,resources=clusterextensions,verbs=get;list;watch
// +kubebuilder:rbac:groups=olm.operatorframework.io,resources=clusterextensions/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=get;list;watch;create;update;patch;delete;escalate;bind
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings the ClusterRoles of one ClusterExtension to the state
// its mode asks for and reports the result in the RBACManaged condition
// (the steps below, run by reconciler.Reconcile).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return reconciler.Reconcile[*ocv1.ClusterExtension, *plan, outcome](ctx, req, r.Client, r)
}

// New returns an empty ClusterExtension to read into.
func (r *Reconciler) New() *ocv1.ClusterExtension { return &ocv1.ClusterExtension{} }

// Deleting: an extension being uninstalled takes access to its APIs with
// it.
func (r *Reconciler) Deleting(ctx context.Context, ce *ocv1.ClusterExtension) error {
	return r.Cleanup(ctx, ce.Name)
}

// Write carries out the plan and records Events for what changed.
func (r *Reconciler) Write(ctx context.Context, ce *ocv1.ClusterExtension, p *plan) (outcome, error) {
	out := r.write(ctx, p)
	r.recordChanges(ce, out)
	return out, out.err()
}

// Status sets oria's RBACManaged condition on ce.
func (r *Reconciler) Status(ce *ocv1.ClusterExtension, p *plan, out outcome, err error) {
	setCondition(ce, conditionFor(p, out, err))
}

// Patch applies the RBACManaged condition when it changed (patchCondition).
func (r *Reconciler) Patch(ctx context.Context, before, ce *ocv1.ClusterExtension) (time.Duration, error) {
	return 0, r.patchCondition(ctx, before, ce)
}

// Requeue looks again after the recheck interval at a conflict (an object
// oria does not watch), soon while the API server's discovery is pending,
// and when the writes relied on an expectation.
func (r *Reconciler) Requeue(p *plan, out outcome) reconciler.Requeue {
	return reconciler.In(reconciler.Soonest(reconciler.RecheckIf(len(out.conflicts) > 0, r.recheck()),
		reconciler.RecheckIf(p.scopesPending, lookup.ScopesRecheck), out.recheck))
}

func (r *Reconciler) recheck() time.Duration {
	return r.opts.ConflictRecheckInterval
}

func (r *Reconciler) writer() *engine.Writer {
	// The engine's default pool: the roles of an extension with up to 16
	// APIs go out at once (a pool of 16 took two round trips for a 5-API
	// extension's 20 roles).
	return r.Base.Writer(r.recheck(), 0)
}

// write applies the plan through the engine: generated roles first
// (engine.Ensure, engine/write.go), then hand-overs of roles the bundle
// adopted (engine.HandOverAll, engine/handover.go), bundle labels
// (engine.Apply, engine/apply.go), then deletions (engine.Delete,
// engine/write.go).
func (r *Reconciler) write(ctx context.Context, p *plan) outcome {
	if !p.valid {
		return outcome{}
	}
	w := r.writer()
	owns := func(o client.Object) bool { return ownership.ExtensionOwns(o, p.ext.Name, p.ext.UID) }
	ensured := engine.Ensure(ctx, w, roleKind, owns, p.desired, p.cached)
	handed := engine.HandOverAll(ctx, w, roleKind.Name, p.handOvers)
	bundle := engine.Apply(ctx, w, p.bundleApplies, func(i int) string { return p.bundleNames[i] })
	deleted := engine.Delete(ctx, w, roleKind.Name, p.stale)
	return newOutcome(p, ensured, handed, bundle, deleted)
}

// roleKind is how the engine writes generated roles.
var roleKind = engine.ClusterRoleKind(exclusiveLabels...)

// Cleanup removes every role oria generated for the extension named
// name. The roles' owner references would let the garbage collector do it
// too, but only once it notices; access to an uninstalled extension's APIs
// goes now.
func (r *Reconciler) Cleanup(ctx context.Context, name string) error {
	roles, err := r.extensionRoles(ctx, name)
	if err != nil {
		return err
	}
	stale := StaleRoles(roles, name, nil, nil)
	return errors.Join(engine.Summarize(engine.Delete(ctx, r.writer(), roleKind.Name, stale)).Errors...)
}
