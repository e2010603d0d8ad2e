// Package scopeinstance implements the ScopeInstance controller, the only
// code in oria that writes RoleBindings and ClusterRoleBindings (RBACPolicy
// objects are compiled into a ScopeTemplate and a ScopeInstance).
//
// An instance binds every role of its ScopeTemplate to the template's
// subjects:
//
//   - in namespaces: the union of spec.namespaces and the namespaces
//     spec.namespaceSelector matches, one RoleBinding (roleRef ClusterRole)
//     per role in each; a ServiceAccount subject without a namespace is the
//     ServiceAccount of that name in the binding's namespace;
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
// A template's inline ClusterRoles are bound only once the ScopeTemplate
// controller has created them: binding a name before it exists would grant
// whatever a same-name role someone else creates in the meantime grants.
// If such a foreign role holds the name, the bindings to it are removed and
// the instance reports Conflict.
package scopeinstance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/manager"
	"github.com/operator-framework/oria/internal/metrics"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/publish"
	"github.com/operator-framework/oria/internal/reconciler"
	"github.com/operator-framework/oria/internal/status"
)

// Event reasons.
const (
	EventBindingsCreated  = "BindingsCreated"
	EventBindingsUpdated  = "BindingsUpdated"
	EventBindingsReplaced = "BindingsReplaced"
	EventBindingsDeleted  = "BindingsDeleted"
	EventConflict         = "Conflict"
)

// ControllerName names the controller in logs and metrics; RecorderName is
// the reporting controller of its Events.
const (
	ControllerName = "scopeinstance"
	RecorderName   = "oria-" + ControllerName
)

// memo remembers conflicting bindings for every Reconciler of this process
// (see engine.Memo).
var memo = engine.NewMemo()

// DefaultRecheckInterval is how often an instance in conflict looks
// again: the conflicting object is not oria's, so oria's cache does not show
// it and no event announces that it is gone.
const DefaultRecheckInterval = 30 * time.Second

// ServiceAccountRecheck is how often an instance whose ServiceAccount does
// not exist looks again (one metadata read): a ServiceAccount created after
// the instance is noticed within seconds, without a cache of every
// ServiceAccount in the cluster.
const ServiceAccountRecheck = 3 * time.Second

// DefaultMaxConcurrentReconciles is how many instances are reconciled at
// once. A worker waits for the slowest write of its instance before taking
// the next, so too few leave the API server's capacity unused; too many
// only hold plans in memory (thousands of desired bindings each), because
// every reconcile's writes share the process's engine.MaxInFlight (128):
// two fan-out reconciles of 64 writers fill it. In the benchmark
// (docs/benchmarks.md, third session of 2026-11-23) 4 workers converged
// 50,000 RoleBindings faster and leaner than 8 (35.6 s and 145 MB against
// 40.7-41.0 s and 166-170 MB; 3 workers: 37.4 s, 150 MB).
const DefaultMaxConcurrentReconciles = 4

// Options configure the controller.
type Options struct {
	// MaxConcurrentReconciles is the number of workers
	// (DefaultMaxConcurrentReconciles when 0).
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
}

// DefaultStatusSpacing is how often, at most, an instance whose bound
// namespaces keep changing writes them to its status (see status.Spacing):
// a namespace's binding is made at once, the list that reports it follows
// within a second.
const DefaultStatusSpacing = time.Second

// Reconciler reconciles ScopeInstances.
type Reconciler struct {
	// Client reads from the cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server: objects without oria's labels
	// are not in the cache.
	APIReader client.Reader
	// Recorder emits Events on instances.
	Recorder events.EventRecorder

	// warnings remembers the Warning events recorded (WarnOnTransition).
	warnings reconciler.Warnings
	// Workers: see Options.
	Workers int
	// ConflictRecheckInterval: see Options.
	ConflictRecheckInterval time.Duration
	// Impersonators writes the bindings of instances with a
	// serviceAccount; nil refuses such instances (ReconcileError).
	Impersonators *Impersonators
	// Timing: see Options.
	Timing publish.Timing
	// Bindings looks up an instance's cached bindings by index; nil lists
	// them through Client by label.
	Bindings *manager.InstanceBindings
	// Spacing spaces out the status writes that only count bound
	// namespaces; nil writes every change at once.
	Spacing *status.Spacing
}

// SetupWithManager registers the controller (and the shared binding
// indexes) with mgr.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	bindings, err := manager.NewInstanceBindings(context.Background(), mgr.GetCache())
	if err != nil {
		return err
	}
	r := &Reconciler{
		Bindings:  bindings,
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder(RecorderName),
		Workers:   opts.Workers,

		ConflictRecheckInterval: opts.ConflictRecheckInterval,
		Timing:                  opts.Timing,
		Spacing:                 status.NewSpacing(cmp.Or(opts.StatusSpacing, DefaultStatusSpacing)),
		Impersonators: &Impersonators{Config: mgr.GetConfig(), Options: client.Options{
			Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: nil}},
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&oriav1alpha1.ScopeInstance{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&rbacv1.RoleBinding{}, manager.EnqueueController(oriav1alpha1.GroupVersion.Group, ownership.KindScopeInstance,
			memo.Of(engine.RoleBindingKind.Name))).
		Watches(&rbacv1.ClusterRoleBinding{}, manager.EnqueueController(oriav1alpha1.GroupVersion.Group, ownership.KindScopeInstance,
			memo.Of(engine.ClusterRoleBindingKind.Name))).
		Watches(&oriav1alpha1.ScopeTemplate{},
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				return r.instancesOf(ctx, o.GetName())
			}),
			// A new spec, or a new verdict on its roles (its Ready
			// condition: a referenced ClusterRole appeared or went).
			builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, templateReadyChanged()))).
		Watches(&rbacv1.ClusterRole{},
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				return r.instancesOf(ctx, ownership.ControllerName(o.GetOwnerReferences(), ownership.KindScopeTemplate))
			})).
		WatchesMetadata(manager.NamespaceMetadata(), &namespaceHandler{r: r}).
		// The ConfigMaps oria publishes into (only those are cached): one
		// deleted or changed is put right, or reported.
		Watches(&corev1.ConfigMap{},
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				var reqs []reconcile.Request
				for _, name := range r.instancesForConfigMap(ctx, o) {
					reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
				}
				return reqs
			})).
		WithOptions(controller.Options{MaxConcurrentReconciles: cmp.Or(opts.MaxConcurrentReconciles, DefaultMaxConcurrentReconciles)}).
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

// instancesOf returns a request for every instance of the named template.
func (r *Reconciler) instancesOf(ctx context.Context, template string) []reconcile.Request {
	if template == "" {
		return nil
	}
	return reconciler.Requests(ctx, r.Client, &oriav1alpha1.ScopeInstanceList{},
		client.MatchingFields{manager.IndexScopeTemplateName: template}, client.UnsafeDisableDeepCopy)
}

// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=scopeinstances,verbs=get;list;watch
// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=scopeinstances/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=scopeinstances/finalizers,verbs=update
// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=scopetemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings;clusterrolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=get;list;watch;bind
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;impersonate
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one instance's bindings and status up to date.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	steps := &reconciler.Steps[*oriav1alpha1.ScopeInstance, *plan, result]{
		Client:  r.Client,
		New:     func() *oriav1alpha1.ScopeInstance { return &oriav1alpha1.ScopeInstance{} },
		Cleanup: r.reconcileDelete,
		// Being deleted: the bindings go at once; revocation never waits on a finalizer.
		Deleting: func(ctx context.Context, si *oriav1alpha1.ScopeInstance) error {
			return r.reconcileDelete(ctx, si.Name)
		},
		Gather: r.gather,
		Write: func(ctx context.Context, si *oriav1alpha1.ScopeInstance, p *plan) (result, error) {
			if p.specErr != nil {
				metrics.NamespaceBinding.Abandon(si.Name)
				return r.revokeFrozen(ctx, si, p), nil
			}
			res, err := r.write(ctx, si, p)
			if err != nil {
				return res, err
			}
			return res, errors.Join(summarizeErrors(res.summary.Errors), res.published.Err)
		},
		Status: func(si *oriav1alpha1.ScopeInstance, p *plan, res result, err error) {
			si.Status = computeStatus(si, p, res, err)
		},
		Patch: reconciler.WarnOnTransition(&r.warnings, r.Recorder, func(o *oriav1alpha1.ScopeInstance) []metav1.Condition { return o.Status.Conditions },
			reconciler.SpacedStatusPatch(r.Client, r.Spacing, func(o *oriav1alpha1.ScopeInstance) any { return o.Status },
				func(before, after *oriav1alpha1.ScopeInstance) bool {
					return routineChange(before.Status, after.Status)
				})),
		Requeue: func(p *plan, res result) time.Duration {
			// Conflicts and refusals are about objects oria does not watch
			// (someone else's binding, the ServiceAccount's rights), so
			// look again after a while.
			saMissing := p.specErr != nil && p.specErr.Reason == oriav1alpha1.ReasonServiceAccountNotFound
			// An attenuated instance rereads its referenced roles (see
			// ceiling.go). A coalesced restart of the publication is due
			// after res.published.after.
			return reconciler.Soonest(reconciler.RecheckIf(len(res.conflicts) > 0 || res.refused() || res.published.Conflict != "" || p.attenuated, r.recheck()),
				reconciler.RecheckIf(saMissing, min(ServiceAccountRecheck, r.recheck())), res.summary.Recheck(), res.published.After)
		},
	}
	return steps.Reconcile(ctx, req)
}

func (r *Reconciler) recheck() time.Duration {
	return cmp.Or(r.ConflictRecheckInterval, DefaultRecheckInterval)
}

// reconcileDelete removes the bindings of a deleted instance, and what it
// published.
func (r *Reconciler) reconcileDelete(ctx context.Context, instance string) error {
	r.Spacing.Forget(instance)
	if err := r.publisher().Withdraw(ctx, instance, nil); err != nil {
		return err
	}
	rbs, crbs, err := r.existingBindings(ctx, instance)
	if err != nil {
		return err
	}
	w := r.writer()
	s := engine.Summarize(
		engine.Delete(ctx, w, engine.RoleBindingKind.Name, rbs),
		engine.Delete(ctx, w, engine.ClusterRoleBindingKind.Name, crbs))
	if n := s.Count[engine.Deleted]; n > 0 {
		ctrl.LoggerFrom(ctx).Info("deleted the bindings of a deleted ScopeInstance", "count", n)
	}
	return summarizeErrors(s.Errors)
}

func (r *Reconciler) writer() *engine.Writer {
	return &engine.Writer{Client: r.Client, Reader: r.APIReader, Cache: r.Client, Workers: r.Workers, Memo: memo, Recheck: r.recheck()}
}

// result is what the writes of one reconcile did.
type result struct {
	summary    engine.Summary
	ensuredRBs []engine.Outcome
	// conflicts are sentences naming what was left alone.
	conflicts []string
	// bound are the target namespaces where every intended binding is in
	// place, computed once (boundNamespaces) for both the publication and
	// status.boundNamespaces.
	bound []string
	// published is what the publication did.
	published publish.Outcome
	// revoked counts the bindings deleted because the ServiceAccount no
	// longer vouches for what their role grants.
	revoked int
}

// refused reports whether the ServiceAccount may not write some bindings.
func (res result) refused() bool { return len(res.summary.Forbidden) > 0 }

// write creates and repairs first, publishes (publish.Publisher), deletes after,
// so that a changed role never leaves a gap without access and a published
// namespace always has its bindings. For an instance with a
// serviceAccount, the ServiceAccount is asked first about roles whose new
// rules are held back, and a binding it no longer vouches for is deleted
// at once (see ceiling.go).
func (r *Reconciler) write(ctx context.Context, si *oriav1alpha1.ScopeInstance, p *plan) (result, error) {
	w, err := r.writerFor(si)
	if err != nil {
		return result{}, err
	}
	instanceOwns := ownership.InstanceOwner(si.Name)
	owns := func(o client.Object) bool { return instanceOwns(o) }
	existingRBs, existingCRBs := engine.ByKey(p.existingRBs), engine.ByKey(p.existingCRBs)
	v := vouched{rbs: p.wantRBs, crbs: p.wantCRBs}
	if p.ceiling != nil {
		if v, err = r.vouch(ctx, p.ceiling, p, existingRBs, existingCRBs); err != nil {
			return result{}, err
		}
	}
	ensuredRBs := engine.Ensure(ctx, w, engine.RoleBindingKind, owns, v.rbs, existingRBs)
	ensuredCRBs := engine.Ensure(ctx, w, engine.ClusterRoleBindingKind, owns, v.crbs, existingCRBs)
	revokedRBs, revokedCRBs := revoke(ctx, w, v, ensuredRBs, ensuredCRBs, existingRBs, existingCRBs)
	ensuredRBs, ensuredCRBs = append(ensuredRBs, v.refusedRBs...), append(ensuredCRBs, v.refusedCRBs...)
	metrics.NamespaceBinding.Bound(si.Name, ensuredRBs)
	ensured := engine.Summarize(ensuredRBs, ensuredCRBs)
	bound := boundNamespaces(si.Name, p, ensured)
	clusterOK := len(ensured.Errors)+len(ensured.Conflicts)+len(ensured.Forbidden) == 0 && len(p.pending)+len(p.conflicted) == 0
	pubs := r.publisher().Publish(ctx, si, p.targets.Cluster, bound, clusterOK)
	deletedRBs := append(revokedRBs, engine.Delete(ctx, w, engine.RoleBindingKind.Name, p.staleRBs)...)
	deletedCRBs := append(revokedCRBs, engine.Delete(ctx, w, engine.ClusterRoleBindingKind.Name, p.staleCRBs)...)
	res := result{summary: engine.Summarize(ensuredRBs, ensuredCRBs, deletedRBs, deletedCRBs), ensuredRBs: ensuredRBs, bound: bound, published: pubs,
		revoked: len(revokedRBs) + len(revokedCRBs)}
	for _, role := range p.conflicted {
		res.conflicts = append(res.conflicts, fmt.Sprintf("ClusterRole %q of ScopeTemplate %q exists and was not created by oria for the template", role, p.template.Name))
	}
	for _, c := range res.summary.Conflicts {
		res.conflicts = append(res.conflicts, c.Error())
	}
	r.recordEvents(si, ensuredRBs, ensuredCRBs, deletedRBs, deletedCRBs, res.conflicts)
	return res, nil
}
