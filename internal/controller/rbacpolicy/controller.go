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
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
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
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/lookup"
	"github.com/operator-framework/oria/internal/olm"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/reconciler"
	"github.com/operator-framework/oria/internal/record"
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
	// Now is the clock policies' windows are judged by, for their status
	// (time.Now unless a test sets it).
	Now func() time.Time
}

// Deps are what the controller is built from, each required (New refuses
// a missing one): controller.SetupAll builds them once per manager, and
// the integration tests build theirs with the same constructors.
type Deps struct {
	// Base: the clients (APIReader reads a compiled object the cache does
	// not show yet, a bundle role's rules), Events on policies, the engine
	// and the Memo.
	reconciler.Base
	// APIScopes tells cluster-scoped APIs from namespaced ones
	// (lookup.NewAPIScopesForConfig), shared with the extension
	// controller.
	APIScopes *lookup.APIScopes
	// BundleRoles is the cache of bundle-provided ClusterRoles
	// (manager.NewBundleRoleCache), shared with the extension controller:
	// a change of one requeues the policies of its extension.
	BundleRoles cache.Cache
	// OLM holds back the watch of ClusterExtensions until the API server
	// serves them (olm.NewAPIWait); meanwhile policies report
	// OLMNotInstalled, and all are looked at again when it opens.
	OLM *olm.APIWait
}

// Reconciler reconciles RBACPolicies. Make one with New.
type Reconciler struct {
	Deps
	opts Options

	// warnings remembers the Warning events recorded (WarnOnTransition).
	warnings reconciler.Warnings
}

// New returns the Reconciler of d and o, or an error naming a missing
// dependency.
func New(d Deps, o Options) (*Reconciler, error) {
	if err := reconciler.Check("the RBACPolicy controller", d.Base, reconciler.Need{Name: "the API scopes", Set: d.APIScopes != nil},
		reconciler.Need{Name: "the bundle-role cache", Set: d.BundleRoles != nil}, reconciler.Need{Name: "the API wait", Set: d.OLM != nil}); err != nil {
		return nil, err
	}
	return newReconciler(d, o), nil
}

// newReconciler is New without the check, for the package's unit tests.
func newReconciler(d Deps, o Options) *Reconciler {
	o.ConflictRecheckInterval = cmp.Or(o.ConflictRecheckInterval, DefaultRecheckInterval)
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Reconciler{Deps: d, opts: o}
}

// SetupWithManager builds the controller (New) and registers it and its
// index with mgr.
func SetupWithManager(mgr ctrl.Manager, d Deps, o Options) error {
	r, err := New(d, o)
	if err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&oriav1alpha1.RBACPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&oriav1alpha1.ScopeTemplate{}).
		Owns(&oriav1alpha1.ScopeInstance{}).
		WatchesRawSource(d.OLM.Defer(source.Kind(mgr.GetCache(), client.Object(&ocv1.ClusterExtension{}), handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, o client.Object) []reconcile.Request { return r.policiesOf(ctx, o.GetName()) }),
			watch.ExtensionChanged()))).
		// The watches of roles and CRDs below map to policies that exist,
		// each enqueued by its own add: their initial lists are skipped
		// (watch.SkipInitialList). The extensions' is not: the API wait
		// may start it after the controller.
		//
		// oria's generated roles (the cache holds only oria's): one created,
		// changed, restored or deleted is judged again by the policies of
		// its extension (roles.go).
		Watches(&rbacv1.ClusterRole{}, handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, o client.Object) []reconcile.Request {
				return r.policiesOf(ctx, ownership.ControllerOf(o.GetOwnerReferences(), ocv1.GroupVersion.Group, ocv1.ClusterExtensionKind))
			}), builder.WithPredicates(watch.SkipInitialList[client.Object]())).
		WatchesMetadata(lookup.CRDMetadata(), handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, o client.Object) []reconcile.Request {
				return r.policiesOf(ctx, olm.ExtensionOf(o))
			}), builder.WithPredicates(watch.SkipInitialList[client.Object]())).
		// A bundle role edited to reach beyond its extension (or back) is
		// withheld (or bound again) by the policies of its extension.
		WatchesRawSource(source.Kind(d.BundleRoles, lookup.ClusterRoleMetadata(),
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, o *metav1.PartialObjectMetadata) []reconcile.Request {
				return r.policiesOf(ctx, olm.ExtensionOf(o))
			}), watch.SkipInitialList[*metav1.PartialObjectMetadata]())).
		WithOptions(controller.Options{MaxConcurrentReconciles: cmp.Or(o.MaxConcurrentReconciles, DefaultMaxConcurrentReconciles),
			EnableWarmup: ptr.To(true)}) // a standby's watches run before it leads (controller.SetupAll)
	if !d.OLM.Available() {
		// Every policy said OLMNotInstalled: look at all of them again.
		b = b.WatchesRawSource(d.OLM.Defer(source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
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
	return reconciler.Requests(ctx, r.Client, &oriav1alpha1.RBACPolicyList{}, client.MatchingFields{lookup.IndexPolicyExtension: extension},
		client.UnsafeDisableDeepCopy)
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
// state to look at (not InvalidMode: warnable).
func (r *Reconciler) Patch(ctx context.Context, before, after *oriav1alpha1.RBACPolicy) (time.Duration, error) {
	hold, err := reconciler.WarnOnTransition(&r.warnings, r.Recorder, warnable,
		reconciler.StatusPatch(r.Client, func(o *oriav1alpha1.RBACPolicy) any { return o.Status }))(ctx, before, after)
	if err == nil && hold == 0 {
		r.recordRevoked(before, after)
	}
	return hold, err
}

// recordRevoked names who revoked the policy, when and why (its record,
// package record) in a Revoked Event when its grant has just expired and
// the record says it was revoked.
func (r *Reconciler) recordRevoked(before, after *oriav1alpha1.RBACPolicy) {
	rec := record.Revocation.Of(after.Annotations)
	was := meta.FindStatusCondition(before.Status.Conditions, oriav1alpha1.TypeReady)
	now := meta.FindStatusCondition(after.Status.Conditions, oriav1alpha1.TypeReady)
	if r.Recorder == nil || rec.Empty() || now == nil || now.Reason != oriav1alpha1.ReasonExpired || (was != nil && was.Reason == oriav1alpha1.ReasonExpired) {
		return
	}
	r.Recorder.Eventf(after, nil, corev1.EventTypeNormal, "Revoked", "Expire", "the grant %s: revoked %s", binding.PolicyWindow(after.Spec).Describe(time.Now()), rec)
}

// Requeue looks again soon while the API server's discovery is pending,
// after the recheck interval at a conflict or a withheld role that is not a
// bundle's (objects oria's caches may not show: a hand-made role going away
// or being fixed lets the policy bind within the interval), and at the
// expiry of a policy with no compiled objects (windowRequeue).
func (r *Reconciler) Requeue(p *plan, out result) reconciler.Requeue {
	recheck := r.opts.ConflictRecheckInterval
	if p.scopesPending {
		return reconciler.In(min(lookup.ScopesRecheck, recheck))
	}
	return reconciler.In(reconciler.Soonest(reconciler.RecheckIf(out.conflict != "" || len(p.foreign) > 0 || len(p.pending) > 0, recheck), r.windowRequeue(p)))
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
