// Package scopeinstance implements the ScopeInstance controller, the only
// code in oria that writes RoleBindings and ClusterRoleBindings (RBACPolicy
// objects are compiled into a ScopeTemplate and a ScopeInstance).
//
// An instance binds every role of its ScopeTemplate to the template's
// subjects:
//
//   - in namespaces: spec.namespaces, or the namespaces
//     spec.namespaceSelector matches (the schema makes the two exclusive),
//     one RoleBinding (roleRef ClusterRole) per role in each; a
//     ServiceAccount subject without a namespace is the ServiceAccount of
//     that name in the binding's namespace;
//   - cluster-wide when neither field is set: one ClusterRoleBinding per
//     role (a ServiceAccount subject then needs a namespace, else the
//     instance reports InvalidSubject).
//
// Names are deterministic, "<instance>-<role>-<hash>" (see package binding).
// Namespaces are live: a namespace that is created, or relabelled to match,
// is bound as soon as its event arrives, one that stops matching loses its
// bindings, and a listed namespace that does not exist yet is reported
// (NamespaceNotFound) and bound when it appears. A terminating namespace is
// left alone: nothing is created there and its bindings are left to the
// namespace controller, so an operator finishing finalizers keeps its access.
//
// Writes are fanned out over a bounded worker pool (package engine); the
// API server's priority and fairness is the throttle. A failure or a conflict in one
// namespace is reported and retried without holding up the others.
//
// Spec errors (TemplateNotFound, TemplateInvalid, InvalidSelector,
// InvalidSubject) are terminal and change nothing: existing bindings stay
// until the spec is fixed or the instance is deleted, so that re-creating a
// template or fixing a typo never causes an outage. Deleting the instance
// removes its bindings (here, and through ownerReferences by the garbage
// collector if oria is not running).
//
// A time-bound instance (spec.notBefore, spec.expiresAt) has no bindings
// outside its window, whatever else is wrong with it, and requeues itself
// for the next instant of the window (window.go).
//
// A template's inline ClusterRoles are bound only once the ScopeTemplate
// controller has created them: binding a name before it exists would grant
// whatever a same-name role someone else creates in the meantime grants.
// If such a foreign role holds the name, the bindings to it are removed and
// the instance reports Conflict.
package scopeinstance

import (
	"cmp"
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/authz"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/impersonate"
	"github.com/operator-framework/oria/internal/lookup"
	"github.com/operator-framework/oria/internal/metrics"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/publish"
	"github.com/operator-framework/oria/internal/reconciler"
	"github.com/operator-framework/oria/internal/status"
	"github.com/operator-framework/oria/internal/watch"
)

// ControllerName names the controller in logs and metrics; RecorderName is
// the reporting controller of its Events.
const (
	ControllerName = "scopeinstance"
	RecorderName   = "oria-" + ControllerName
)

// DefaultRecheckInterval is how often an instance in conflict looks
// again: the conflicting object is not oria's, so oria's cache does not show
// it and no event announces that it is gone.
const DefaultRecheckInterval = 30 * time.Second

// ServiceAccountRecheck is how often an instance whose ServiceAccount does
// not exist looks again (one metadata read): a ServiceAccount created after
// the instance is noticed within seconds, without a cache of every
// ServiceAccount in the cluster.
const ServiceAccountRecheck = 3 * time.Second

// DefaultMaxConcurrentReconciles is how many fan-outs are bound at once
// (instances over many namespaces reconciled inside their window; the
// controller has RevokeWorkers more workers for everything else, TakeSlot).
// A worker waits for the slowest write of its instance before taking
// the next, so too few leave the API server's capacity unused; too many
// only hold plans in memory (thousands of desired bindings each), because
// every reconcile's writes share the engine's MaxInFlight (128) tokens:
// two fan-out reconciles of 64 writers fill it. In the benchmark 4 workers
// converged the largest fan-out faster and leaner than 8 or 3
// (docs/benchmarks.md, History, 100bb27).
const DefaultMaxConcurrentReconciles = 4

// Options configure the controller; every field has a default.
type Options struct {
	// MaxConcurrentReconciles is the number of fan-outs bound at once
	// (DefaultMaxConcurrentReconciles when 0); the controller has
	// RevokeWorkers more workers (TakeSlot).
	MaxConcurrentReconciles int
	// Workers bounds the parallel writes of one reconcile
	// (engine.DefaultWorkers when 0).
	Workers int
	// ConflictRecheckInterval: see DefaultRecheckInterval (the
	// default when 0).
	ConflictRecheckInterval time.Duration
	// Timing coalesces the restarts of publications (package publish's
	// defaults when zero).
	Timing publish.Timing
	// StatusSpacing is the least time between two status writes of an
	// instance that only count its bound namespaces
	// (DefaultStatusSpacing when 0; see status.Spacing).
	StatusSpacing time.Duration
	// ExpiryWarning is how long before a time-bound grant's expiresAt the
	// AccessExpiring Event is recorded (the manager's --expiry-warning,
	// DefaultExpiryWarning); 0 records none.
	ExpiryWarning time.Duration
	// Now is the clock the windows of time-bound instances are judged by
	// (time.Now unless a test sets it).
	Now func() time.Time
}

// DefaultStatusSpacing is how often, at most, an instance whose bound
// namespaces keep changing writes them to its status (see status.Spacing):
// a namespace's binding is made at once, the list that reports it follows
// within a second.
const DefaultStatusSpacing = time.Second

// Deps are what the controller is built from, each required (New refuses
// a missing one): controller.SetupAll builds them once per manager, and
// the integration tests build theirs with the same constructors.
type Deps struct {
	// Base: the clients (APIReader reads objects without oria's labels),
	// Events on instances, the engine and the Memo.
	reconciler.Base
	// Bindings looks up an instance's cached bindings by index.
	Bindings *lookup.InstanceBindings
	// Impersonators write the bindings of an instance with a ceiling
	// (spec.serviceAccount) as its ServiceAccount.
	Impersonators *impersonate.Clients
	// Authz asks a ServiceAccount about the new rules of a role its
	// bindings grant (ceiling.go).
	Authz *authz.Authorizer
	// ForeignRoles caches the ClusterRoles that are not oria's
	// (manager.NewForeignRoleCache): a gate copies whichever roles its
	// template names, and follows them as they change (gate.go).
	ForeignRoles cache.Cache
}

// Reconciler reconciles ScopeInstances. Make one with New.
type Reconciler struct {
	Deps
	opts Options

	// latency measures how long a namespace event waits for its binding
	// (oria_namespace_binding_latency_seconds).
	latency *metrics.NamespaceLatency
	// spacing spaces out the status writes that only count bound
	// namespaces.
	spacing *status.Spacing
	// warnings remembers the Warning events recorded (WarnOnTransition).
	warnings reconciler.Warnings
	// windowEvents remembers the Events of time-bound grants recorded.
	windowEvents windowMemo
	// binds holds a token per fan-out binding (TakeSlot).
	binds chan struct{}
	// roles reads the roles a gate copies (gate.go).
	roles lookup.Roles
}

// New returns the Reconciler of d and o, or an error naming a missing
// dependency.
func New(d Deps, o Options) (*Reconciler, error) {
	if err := reconciler.Check("the ScopeInstance controller", d.Base, reconciler.Need{Name: "the binding index", Set: d.Bindings != nil},
		reconciler.Need{Name: "the impersonating clients", Set: d.Impersonators != nil}, reconciler.Need{Name: "the authorizer", Set: d.Authz != nil},
		reconciler.Need{Name: "the cache of ClusterRoles that are not oria's", Set: d.ForeignRoles != nil}); err != nil {
		return nil, err
	}
	return newReconciler(d, o), nil
}

// newReconciler is New without the check, for the package's unit tests
// that exercise one step with part of the dependencies.
func newReconciler(d Deps, o Options) *Reconciler {
	o.StatusSpacing = cmp.Or(o.StatusSpacing, DefaultStatusSpacing)
	o.ConflictRecheckInterval = cmp.Or(o.ConflictRecheckInterval, DefaultRecheckInterval)
	if o.Now == nil {
		o.Now = time.Now
	}
	o.MaxConcurrentReconciles = cmp.Or(o.MaxConcurrentReconciles, DefaultMaxConcurrentReconciles)
	return &Reconciler{Deps: d, opts: o, latency: metrics.NewBindingLatency(), spacing: status.NewSpacing(o.StatusSpacing),
		binds: make(chan struct{}, o.MaxConcurrentReconciles), roles: lookup.Roles{Managed: d.Client, Foreign: d.ForeignRoles}}
}

// SetupWithManager builds the controller (New) and registers it with mgr.
func SetupWithManager(mgr ctrl.Manager, d Deps, o Options) error {
	r, err := New(d, o)
	if err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&oriav1alpha1.ScopeInstance{}, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	for _, k := range engine.SetKinds() { // the bindings, every kind of a binding.Set
		b = b.Watches(k.Object, watch.EnqueueController(oriav1alpha1.GroupVersion.Group, ownership.KindScopeInstance, r.Memo.Of(k.Name)))
	}
	return b.
		// The watches of templates, their roles and namespaces map to
		// instances that exist, each enqueued by its own add: their initial
		// lists are skipped (watch.SkipInitialList; the namespace handler
		// itself, namespaces.go).
		Watches(&oriav1alpha1.ScopeTemplate{},
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				return r.instancesOf(ctx, o.GetName())
			}),
			// A new spec, or a new verdict on its roles (its Ready
			// condition: a referenced ClusterRole appeared or went).
			builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, templateReadyChanged()),
				watch.SkipInitialList[client.Object]())).
		// oria's ClusterRoles: a template's inline role concerns its
		// instances, a gate its instance (drift is put right), and any role
		// a template names the gates that copy it (gate.go); so do the
		// roles that are not oria's.
		Watches(&rbacv1.ClusterRole{},
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				return append(r.instancesOf(ctx, ownership.ControllerName(o.GetOwnerReferences(), ownership.KindScopeTemplate)), r.copying(ctx, o)...)
			}), builder.WithPredicates(watch.SkipInitialList[client.Object]())).
		Watches(&rbacv1.ClusterRole{}, watch.EnqueueController(oriav1alpha1.GroupVersion.Group, ownership.KindScopeInstance,
			r.Memo.Of(gateKind.Name))).
		WatchesRawSource(source.Kind(d.ForeignRoles, client.Object(&rbacv1.ClusterRole{}),
			handler.EnqueueRequestsFromMapFunc(r.copying), watch.SkipInitialList[client.Object]())).
		WatchesMetadata(lookup.NamespaceMetadata(), &namespaceHandler{r: r}).
		// The ConfigMaps oria publishes into (only those are cached): one
		// deleted or changed is put right, or reported. Its initial list is
		// not skipped: a ConfigMap may record an instance that is gone.
		Watches(&corev1.ConfigMap{},
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				var reqs []reconcile.Request
				for _, name := range r.instancesForConfigMap(ctx, o) {
					reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
				}
				return reqs
			})).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.opts.MaxConcurrentReconciles + RevokeWorkers,
			EnableWarmup: ptr.To(true)}). // a standby's watches run before it leads (controller.SetupAll)
		Complete(r)
}

// templateReadyChanged passes ScopeTemplate updates that change its Ready
// condition's status or reason.
func templateReadyChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		reason := func(o client.Object) string {
			t, ok := o.(*oriav1alpha1.ScopeTemplate)
			if !ok {
				return ""
			}
			if c := meta.FindStatusCondition(t.Status.Conditions, oriav1alpha1.TypeReady); c != nil {
				return string(c.Status) + "/" + c.Reason
			}
			return ""
		}
		return reason(e.ObjectOld) != reason(e.ObjectNew)
	}}
}

// copying returns a request for every gated instance whose gate copies the
// ClusterRole o (gatedInstances).
func (r *Reconciler) copying(ctx context.Context, o client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, name := range r.gatedInstances(ctx, o.GetName()) {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	}
	return reqs
}

// instancesOf returns a request for every instance of the named template.
func (r *Reconciler) instancesOf(ctx context.Context, template string) []reconcile.Request {
	if template == "" {
		return nil
	}
	return reconciler.Requests(ctx, r.Client, &oriav1alpha1.ScopeInstanceList{},
		client.MatchingFields{lookup.IndexScopeTemplateName: template}, client.UnsafeDisableDeepCopy)
}

// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=scopeinstances,verbs=get;list;watch
// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=scopeinstances/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=scopeinstances/finalizers,verbs=update
// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=scopetemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=get;list;watch;bind
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;impersonate
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one instance's bindings and status up to date (the
// steps below, run by reconciler.Reconcile).
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	return reconciler.Reconcile[*oriav1alpha1.ScopeInstance, *plan, result](ctx, req, r.Client, r)
}

// The bind slots (reconciler.Slots). The controller's workers are the
// fan-outs it binds at once (MaxConcurrentReconciles,
// DefaultMaxConcurrentReconciles) plus RevokeWorkers. A fan-out (an
// instance with a namespace selector, or listing more than
// binding.SmallGrant namespaces: binding.FanOut) holds one of the bind
// slots for the whole reconcile when it binds (inside its window, or a
// gated one before it): its plan holds a desired binding per namespace
// and its writes fill the engine's tokens. Every other reconcile holds
// none: a revocation (outside the window), a small grant (a few listed
// namespaces, or cluster-wide). So the grants that expire, or start,
// together are revoked, or bound, together, not MaxConcurrentReconciles at
// a time behind one another, and none waits for a fan-out in progress,
// only, when every worker is busy, for the first reconcile to finish.
var _ reconciler.Slots[*oriav1alpha1.ScopeInstance] = (*Reconciler)(nil)

// RevokeWorkers are the controller's workers beyond its bind slots: the
// revocations and small grants it runs at once while every bind slot is
// taken.
const RevokeWorkers = 12

// TakeSlot takes a bind slot for a fan-out that binds now (waiting for one, or
// for ctx to end); release gives it back.
func (r *Reconciler) TakeSlot(ctx context.Context, si *oriav1alpha1.ScopeInstance) (release func(), err error) {
	phase, _ := binding.InstanceWindow(si.Spec).At(r.Now())
	if !binding.FanOut(si.Spec) || !binds(si.Spec, phase) {
		return func() {}, nil
	}
	select {
	case r.binds <- struct{}{}:
		return func() { <-r.binds }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// New returns an empty ScopeInstance to read into.
func (r *Reconciler) New() *oriav1alpha1.ScopeInstance { return &oriav1alpha1.ScopeInstance{} }

// Deleting: an instance being deleted loses its bindings at once;
// revocation never waits on a finalizer.
func (r *Reconciler) Deleting(ctx context.Context, si *oriav1alpha1.ScopeInstance) error {
	return r.Cleanup(ctx, si.Name)
}

// Status sets the instance's status (computeStatus).
func (r *Reconciler) Status(si *oriav1alpha1.ScopeInstance, p *plan, res result, err error) {
	si.Status = computeStatus(si, p, res, err)
}

// Patch writes the status when it changed, holding back a change of only
// the bound namespaces (routineChange) for the status spacing, and warns
// when Ready enters a state to look at.
func (r *Reconciler) Patch(ctx context.Context, before, after *oriav1alpha1.ScopeInstance) (time.Duration, error) {
	return reconciler.WarnOnTransition(&r.warnings, r.Recorder, func(o *oriav1alpha1.ScopeInstance) []metav1.Condition { return o.Status.Conditions },
		reconciler.SpacedStatusPatch(r.Client, r.spacing, func(o *oriav1alpha1.ScopeInstance) any { return o.Status },
			func(before, after *oriav1alpha1.ScopeInstance) bool {
				return routineChange(before.Status, after.Status)
			}))(ctx, before, after)
}

// Requeue looks again after the recheck interval when the outcome depends
// on objects oria does not watch (unwatched), within ServiceAccountRecheck
// while the instance's ServiceAccount is missing, when the writes relied on
// an expectation, when a coalesced restart of the publication is due; and
// at the next instant of its window, exactly, with its priority
// (windowInstant), or at once, at routine priority, after a gate was
// emptied at the expiry or when its status was postponed (postponesStatus).
func (r *Reconciler) Requeue(p *plan, res result) reconciler.Requeue {
	q := reconciler.In(reconciler.Soonest(reconciler.RecheckIf(res.unwatched(p), r.recheck()),
		reconciler.RecheckIf(p.serviceAccountMissing(), min(ServiceAccountRecheck, r.recheck())), res.summary.Recheck(), res.published.After))
	if res.again || postponesStatus(p, res, nil) {
		q.At = p.now
		return q
	}
	q.At, q.Priority = r.windowInstant(p)
	return q
}

func (r *Reconciler) recheck() time.Duration {
	return r.opts.ConflictRecheckInterval
}
