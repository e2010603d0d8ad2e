// Package rbacpolicy implements the RBACPolicy controller: FineGrained
// access to a ClusterExtension's APIs for chosen users, groups and
// ServiceAccounts.
//
// A policy is compiled, not executed: the controller turns it into a
// ScopeTemplate (the extension's generated ClusterRoles for the access level,
// and the policy's subjects) and a ScopeInstance (the policy's namespaces or
// selector), both owned by the policy and named "rbacpolicy-<policy>". The
// ScopeInstance controller writes the RoleBindings / ClusterRoleBindings; the
// policy mirrors its progress in its own status.
package rbacpolicy

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/lookup"
	"github.com/operator-framework/oria/internal/manager"
	"github.com/operator-framework/oria/internal/olm"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/reconciler"
	"github.com/operator-framework/oria/internal/watch"
)

// ControllerName names the controller in logs and metrics; RecorderName is
// the reporting controller of its Events.
const (
	ControllerName = "rbacpolicy"
	RecorderName   = "oria-" + ControllerName
)

// DefaultRecheckInterval is how often a policy in conflict looks again: the
// conflicting object is not the policy's, so no event tells the policy when
// it goes away.
const DefaultRecheckInterval = 30 * time.Second

// DefaultMaxConcurrentReconciles is how many policies are reconciled at
// once.
const DefaultMaxConcurrentReconciles = 4

// Options configure the controller.
type Options struct {
	// DefaultMode is the RBAC mode of extensions without the annotation; it
	// must match the extension controller's.
	DefaultMode oriav1alpha1.RBACMode
	// MaxConcurrentReconciles is the number of workers
	// (DefaultMaxConcurrentReconciles when 0).
	MaxConcurrentReconciles int
	// ConflictRecheckInterval: see DefaultRecheckInterval; zero
	// means the default.
	ConflictRecheckInterval time.Duration
	// APIScopes tells cluster-scoped APIs from namespaced ones (nil: a
	// Reconciler of its own for the manager in SetupWithManager).
	APIScopes *lookup.APIScopes
	// BundleRoles is the cache of bundle-provided ClusterRoles
	// (manager.NewBundleRoleCache): a change of one requeues the policies
	// of its extension. nil: bundle roles are read from the API server on
	// every reconcile, and their changes are not watched.
	BundleRoles cache.Cache
	// Engine is the write engine's state shared by one set of controllers
	// (controller.SetupAll passes one to all); nil makes one of its own.
	Engine *engine.Engine
	// OLM holds back the watch of ClusterExtensions until the API server
	// serves them (manager.OLMGate); meanwhile policies report
	// OLMNotInstalled, and all are looked at again when it opens. nil: the
	// API is served.
	OLM *manager.OLMGate
}

// Reconciler reconciles RBACPolicies.
type Reconciler struct {
	// Client reads from the cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server, for the engine: a compiled
	// object the cache does not show yet may exist (Client when nil).
	APIReader client.Reader
	// Recorder emits Events on policies.
	Recorder events.EventRecorder

	// warnings remembers the Warning events recorded (WarnOnTransition).
	warnings reconciler.Warnings
	// DefaultMode: see Options.
	DefaultMode oriav1alpha1.RBACMode
	// ConflictRecheckInterval: see Options.
	ConflictRecheckInterval time.Duration
	// APIScopes tells cluster-scoped APIs from namespaced ones (nil: a
	// Reconciler of its own for the manager in SetupWithManager).
	APIScopes *lookup.APIScopes
	// BundleRoles reads bundle-provided ClusterRoles as metadata (nil: the
	// API server is asked on every reconcile).
	BundleRoles client.Reader
	// Engine is the write engine's state this controller shares with the
	// others of its manager; nil bounds nothing and observes nothing.
	Engine *engine.Engine
	// Now tells the time policies' windows are judged at, for their status
	// (time.Now when nil).
	Now func() time.Time
}

// SetupWithManager registers the controller and its index with mgr.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	r := &Reconciler{
		Client:      mgr.GetClient(),
		APIReader:   mgr.GetAPIReader(),
		Recorder:    reconciler.LimitEvents(mgr.GetEventRecorder(RecorderName)),
		DefaultMode: opts.DefaultMode,

		ConflictRecheckInterval: cmp.Or(opts.ConflictRecheckInterval, DefaultRecheckInterval),
		APIScopes:               opts.APIScopes,
		Engine:                  cmp.Or(opts.Engine, engine.New(nil)),
	}
	if opts.BundleRoles != nil {
		r.BundleRoles = opts.BundleRoles
	}
	if r.APIScopes == nil {
		var err error
		if r.APIScopes, err = lookup.NewAPIScopesForConfig(mgr.GetConfig()); err != nil {
			return err
		}
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&oriav1alpha1.RBACPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&oriav1alpha1.ScopeTemplate{}).
		Owns(&oriav1alpha1.ScopeInstance{}).
		WatchesRawSource(opts.OLM.Defer(source.Kind(mgr.GetCache(), client.Object(&ocv1.ClusterExtension{}), handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, o client.Object) []reconcile.Request { return r.policiesOf(ctx, o.GetName()) }),
			watch.ExtensionChanged()))).
		// oria's generated roles (the cache holds only oria's): one created,
		// changed, restored or deleted is judged again by the policies of
		// its extension (roles.go).
		Watches(&rbacv1.ClusterRole{}, handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, o client.Object) []reconcile.Request {
				return r.policiesOf(ctx, ownership.ControllerOf(o.GetOwnerReferences(), ocv1.GroupVersion.Group, ocv1.ClusterExtensionKind))
			})).
		WatchesMetadata(lookup.CRDMetadata(), handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, o client.Object) []reconcile.Request {
				return r.policiesOf(ctx, olm.ExtensionOf(o))
			})).
		WithOptions(controller.Options{MaxConcurrentReconciles: cmp.Or(opts.MaxConcurrentReconciles, DefaultMaxConcurrentReconciles)})
	if opts.BundleRoles != nil {
		// A bundle role edited to reach beyond its extension (or back) is
		// withheld (or bound again) by the policies of its extension.
		b = b.WatchesRawSource(source.Kind(opts.BundleRoles, lookup.ClusterRoleMetadata(),
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, o *metav1.PartialObjectMetadata) []reconcile.Request {
				return r.policiesOf(ctx, olm.ExtensionOf(o))
			})))
	}
	if !opts.OLM.Available() {
		// Every policy said OLMNotInstalled: look at all of them again.
		b = b.WatchesRawSource(opts.OLM.Defer(source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			for _, req := range reconciler.Requests(ctx, r.Client, &oriav1alpha1.RBACPolicyList{}) {
				q.Add(req)
			}
			return nil
		})))
	}
	return b.Complete(r)
}

// policiesOf returns a request for every policy of the named extension.
func (r *Reconciler) policiesOf(ctx context.Context, extension string) []reconcile.Request {
	if extension == "" {
		return nil
	}
	return reconciler.Requests(ctx, r.Client, &oriav1alpha1.RBACPolicyList{}, client.MatchingFields{lookup.IndexPolicyExtension: extension})
}

// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=rbacpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=rbacpolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=scopetemplates;scopeinstances,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=olm.operatorframework.io,resources=clusterextensions,verbs=get;list;watch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile compiles one policy and reports its state (the steps below,
// run by reconciler.Reconcile).
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	return reconciler.Reconcile[*oriav1alpha1.RBACPolicy, *plan, result](ctx, req, r.Client, r)
}

// New returns an empty RBACPolicy to read into.
func (r *Reconciler) New() *oriav1alpha1.RBACPolicy { return &oriav1alpha1.RBACPolicy{} }

// Deleting does nothing: the garbage collector removes the owned template
// and instance (and through them the bindings); Cleanup finishes the job
// when the policy is gone.
func (r *Reconciler) Deleting(context.Context, *oriav1alpha1.RBACPolicy) error { return nil }

// Status sets the policy's status (computeStatus).
func (r *Reconciler) Status(policy *oriav1alpha1.RBACPolicy, p *plan, out result, err error) {
	policy.Status = computeStatus(policy, p, out, err)
}

// Patch writes the status when it changed, and warns when Ready enters a
// state to look at.
func (r *Reconciler) Patch(ctx context.Context, before, after *oriav1alpha1.RBACPolicy) (time.Duration, error) {
	return reconciler.WarnOnTransition(&r.warnings, r.Recorder, func(o *oriav1alpha1.RBACPolicy) []metav1.Condition { return o.Status.Conditions },
		reconciler.StatusPatch(r.Client, func(o *oriav1alpha1.RBACPolicy) any { return o.Status }))(ctx, before, after)
}

// Requeue looks again soon while the API server's discovery is pending,
// after the recheck interval at a conflict or a withheld role that is not a
// bundle's (objects oria's caches may not show: a hand-made role going away
// or being fixed lets the policy bind within the interval), and at the
// expiry of a policy with no compiled objects (windowRequeue).
func (r *Reconciler) Requeue(p *plan, out result) time.Duration {
	recheck := cmp.Or(r.ConflictRecheckInterval, DefaultRecheckInterval)
	if p.scopesPending {
		return min(lookup.ScopesRecheck, recheck)
	}
	return reconciler.Soonest(reconciler.RecheckIf(out.conflict != "" || len(p.foreign) > 0 || len(p.pending) > 0, recheck), r.windowRequeue(p))
}

func describeInstance(si *oriav1alpha1.ScopeInstance) string {
	switch {
	case len(si.Spec.Namespaces) == 0 && si.Spec.NamespaceSelector == nil:
		return "the whole cluster"
	case si.Spec.NamespaceSelector == nil:
		return fmt.Sprintf("namespaces %s", strings.Join(si.Spec.Namespaces, ", "))
	default:
		sel, _ := metav1.LabelSelectorAsSelector(si.Spec.NamespaceSelector)
		if len(si.Spec.Namespaces) == 0 {
			return fmt.Sprintf("namespaces matching %q", sel.String())
		}
		return fmt.Sprintf("namespaces %s and those matching %q", strings.Join(si.Spec.Namespaces, ", "), sel.String())
	}
}
