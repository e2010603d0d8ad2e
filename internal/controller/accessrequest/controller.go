// Package accessrequest implements the AccessRequest controller: eligible
// access (issue 43). An AccessRequest asks for one time-bound activation of
// an eligible RBACPolicy; the escalation guard admits it, and its
// decisions (approval, denial, end), by the rules of package eligibility.
// The controller assesses each request (eligibility.Assess) and, while it is
// Active, keeps its grant in place: a ScopeTemplate and a ScopeInstance
// compiled with the policy compiler (eligibility.Activation) for the
// requesting user, in the requested namespaces, with the window from
// approval to approval plus duration; the ScopeInstance controller binds
// and ends it on time as for any time-bound grant. Once the request is no
// longer Active (ended, cancelled, its policy gone or narrowed) the
// compiled objects are deleted. Every write goes through the engine.
package accessrequest

import (
	"cmp"
	"context"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"github.com/operator-framework/oria/internal/lookup"
	"github.com/operator-framework/oria/internal/reconciler"
	"github.com/operator-framework/oria/internal/watch"
)

// ControllerName names the controller in logs and metrics; RecorderName is
// the reporting controller of its Events.
const (
	ControllerName = "accessrequest"
	RecorderName   = "oria-" + ControllerName
)

// DefaultRecheckInterval is how often a request whose compiled objects are
// in conflict looks again.
const DefaultRecheckInterval = 30 * time.Second

// DefaultMaxConcurrentReconciles is how many requests are reconciled at
// once.
const DefaultMaxConcurrentReconciles = 4

// Options configure the controller.
type Options struct {
	// MaxConcurrentReconciles is the number of workers
	// (DefaultMaxConcurrentReconciles when 0).
	MaxConcurrentReconciles int
	// ConflictRecheckInterval: see DefaultRecheckInterval; zero means the
	// default.
	ConflictRecheckInterval time.Duration
	// Now is the clock requests are assessed by (time.Now unless a test
	// sets it).
	Now func() time.Time
}

// Deps are what the controller is built from: the clients, Events on
// requests, the engine and the Memo.
type Deps struct {
	reconciler.Base
	// BundleRoles is the cache of bundle-provided ClusterRoles (metadata
	// only), shared with the RBACPolicy controller: the roles an
	// activation binds are judged as its policy's (rolejudge).
	BundleRoles cache.Cache
}

// Reconciler reconciles AccessRequests. Make one with New.
type Reconciler struct {
	Deps
	opts Options
}

// New returns the Reconciler of d and o, or an error naming a missing
// dependency.
func New(d Deps, o Options) (*Reconciler, error) {
	if err := reconciler.Check("the AccessRequest controller", d.Base, reconciler.Need{Name: "the bundle-role cache", Set: d.BundleRoles != nil}); err != nil {
		return nil, err
	}
	o.ConflictRecheckInterval = cmp.Or(o.ConflictRecheckInterval, DefaultRecheckInterval)
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Reconciler{Deps: d, opts: o}, nil
}

// SetupWithManager builds the controller (New) and registers it with mgr.
// Requests are reconciled on every change (a decision is an annotation,
// which does not move the generation), when their compiled objects change,
// and when their policy changes or goes.
func SetupWithManager(mgr ctrl.Manager, d Deps, o Options) error {
	r, err := New(d, o)
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&oriav1alpha1.AccessRequest{}).
		Owns(&oriav1alpha1.ScopeTemplate{}).
		Owns(&oriav1alpha1.ScopeInstance{}).
		Watches(&oriav1alpha1.RBACPolicy{}, handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, o client.Object) []reconcile.Request { return r.requestsOf(ctx, o.GetName()) })).
		// The roles an activation binds are judged again when one of
		// oria's (the cache holds only oria's) or a bundle's changes or
		// goes, as its policy's are (rolejudge): by every Active request.
		Watches(&rbacv1.ClusterRole{}, handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, _ client.Object) []reconcile.Request { return r.active(ctx) }),
			builder.WithPredicates(watch.SkipInitialList[client.Object]())).
		WatchesRawSource(source.Kind(d.BundleRoles, lookup.ClusterRoleMetadata(),
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, _ *metav1.PartialObjectMetadata) []reconcile.Request {
				return r.active(ctx)
			}), watch.SkipInitialList[*metav1.PartialObjectMetadata]())).
		WithOptions(controller.Options{MaxConcurrentReconciles: cmp.Or(o.MaxConcurrentReconciles, DefaultMaxConcurrentReconciles),
			EnableWarmup: ptr.To(true)}).
		Complete(r)
}

// active returns a request for every Active AccessRequest.
func (r *Reconciler) active(ctx context.Context) []reconcile.Request {
	return r.requests(ctx, func(ar *oriav1alpha1.AccessRequest) bool { return ar.Status.State == oriav1alpha1.StateActive })
}

// requestsOf returns a request for every AccessRequest of the named policy.
func (r *Reconciler) requestsOf(ctx context.Context, policy string) []reconcile.Request {
	return r.requests(ctx, func(ar *oriav1alpha1.AccessRequest) bool { return ar.Spec.PolicyName == policy })
}

// requests returns a request for every cached AccessRequest that keep
// keeps.
func (r *Reconciler) requests(ctx context.Context, keep func(*oriav1alpha1.AccessRequest) bool) []reconcile.Request {
	var list oriav1alpha1.AccessRequestList
	if err := r.Client.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing AccessRequests to requeue")
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if keep(&list.Items[i]) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=accessrequests,verbs=get;list;watch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=get;list;watch
// +kubebuilder:rbac:groups=olm.operatorframework.io,resources=clusterextensions,verbs=get;list;watch
// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=accessrequests/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=rbacpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=scopetemplates;scopeinstances,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile assesses one request and keeps its grant (the steps below, run
// by reconciler.Reconcile).
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	return reconciler.Reconcile[*oriav1alpha1.AccessRequest, *plan, result](ctx, req, r.Client, r)
}

// New returns an empty AccessRequest to read into.
func (r *Reconciler) New() *oriav1alpha1.AccessRequest { return &oriav1alpha1.AccessRequest{} }

// Deleting does nothing: Cleanup removes the grant once the request is
// gone (and the garbage collector would, by the owner references).
func (r *Reconciler) Deleting(context.Context, *oriav1alpha1.AccessRequest) error { return nil }
