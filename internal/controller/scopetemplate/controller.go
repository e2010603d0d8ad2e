// Package scopetemplate implements the ScopeTemplate controller.
//
// A ScopeTemplate lists ClusterRoles (inline, with rules, or references to
// existing roles by name) and the subjects to bind them to. This controller
// validates the template and owns its inline ClusterRoles: they exist only
// while at least one ScopeInstance uses the template, and are deleted when
// none does. Referenced roles are never
// touched. The ScopeInstance controller writes the bindings.
//
// The status reports validity (Ready with reason Valid, InvalidSpec,
// InvalidSubject, Conflict or ReconcileError), the instances that use the
// template and the resolved role names, in spec order. An invalid template
// changes nothing: the roles that exist stay as they are until the spec is
// fixed.
package scopetemplate

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
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
	"github.com/operator-framework/oria/internal/lookup"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/reconciler"
	"github.com/operator-framework/oria/internal/watch"
)

// Event reasons.
const (
	EventClusterRolesCreated = "ClusterRolesCreated"
	EventClusterRolesUpdated = "ClusterRolesUpdated"
	EventClusterRolesDeleted = "ClusterRolesDeleted"
	EventConflict            = "Conflict"
)

// ControllerName names the controller in logs and metrics; RecorderName is
// the reporting controller of its Events.
const (
	ControllerName = "scopetemplate"
	RecorderName   = "oria-" + ControllerName
)

// DefaultRecheckInterval is how often a template in conflict looks again:
// the conflicting ClusterRole is not oria's, so oria's cache does not show
// it and no event announces that it is gone.
const DefaultRecheckInterval = 30 * time.Second

// DefaultMaxConcurrentReconciles is how many templates are reconciled at
// once.
const DefaultMaxConcurrentReconciles = 4

// Options configure the controller; every field has a default.
type Options struct {
	// MaxConcurrentReconciles is the number of workers
	// (DefaultMaxConcurrentReconciles when 0).
	MaxConcurrentReconciles int
	// ConflictRecheckInterval: see DefaultRecheckInterval (the default
	// when 0).
	ConflictRecheckInterval time.Duration
}

// Deps are what the controller is built from, each required (New refuses
// a missing one): controller.SetupAll builds them once per manager, and
// the integration tests build theirs with the same constructors.
type Deps struct {
	// Base: the clients (APIReader reads a ClusterRole without oria's
	// labels), Events on templates, the engine and the Memo.
	reconciler.Base
	// Bindings looks up an instance's cached bindings by index: new
	// inline rules wait for the ceilings their bindings record (see
	// ceiling.go).
	Bindings *lookup.InstanceBindings
}

// Reconciler reconciles ScopeTemplates. Make one with New.
type Reconciler struct {
	Deps
	opts Options

	// warnings remembers the Warning events recorded (WarnOnTransition).
	warnings reconciler.Warnings
}

// New returns the Reconciler of d and o, or an error naming a missing
// dependency.
func New(d Deps, o Options) (*Reconciler, error) {
	if err := reconciler.Check("the ScopeTemplate controller", d.Base, reconciler.Need{Name: "the binding index", Set: d.Bindings != nil}); err != nil {
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
		For(&oriav1alpha1.ScopeTemplate{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&rbacv1.ClusterRole{}, watch.EnqueueController(oriav1alpha1.GroupVersion.Group, ownership.KindScopeTemplate,
			r.Memo.Of(roleKind.Name))).
		// A referenced role that is one of oria's (an extension's generated
		// role, another template's inline role) coming or going changes
		// whether the template's roles exist. Other ClusterRoles are not in
		// oria's cache: a missing one is looked for again on a timer. The
		// templates found exist, each enqueued by its own add: the initial
		// list is skipped (watch.SkipInitialList).
		Watches(&rbacv1.ClusterRole{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return reconciler.Requests(ctx, r.Client, &oriav1alpha1.ScopeTemplateList{}, client.MatchingFields{lookup.IndexScopeTemplateRole: o.GetName()},
				client.UnsafeDisableDeepCopy)
		}), builder.WithPredicates(watch.SkipInitialList[client.Object]())).
		Watches(&oriav1alpha1.ScopeInstance{}, instanceHandler{}).
		// A binding recording a ceiling changed or went: new inline rules
		// held back for it may be due.
		Watches(&rbacv1.RoleBinding{}, r.templateOfBinding(), builder.WithPredicates(hasCeiling())).
		Watches(&rbacv1.ClusterRoleBinding{}, r.templateOfBinding(), builder.WithPredicates(hasCeiling())).
		WithOptions(controller.Options{MaxConcurrentReconciles: cmp.Or(o.MaxConcurrentReconciles, DefaultMaxConcurrentReconciles),
			EnableWarmup: ptr.To(true)}). // a standby's watches run before it leads (controller.SetupAll)
		Complete(r)
}

// instanceHandler enqueues the template an instance uses, and on a change
// of template both the old and the new one: whether a template is in use
// decides whether its inline roles exist.
type instanceHandler struct{}

func (instanceHandler) Create(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	enqueueTemplate(q, e.Object)
}

func (instanceHandler) Update(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	oldT, newT := templateOf(e.ObjectOld), templateOf(e.ObjectNew)
	if oldT != newT {
		enqueueTemplate(q, e.ObjectOld)
		enqueueTemplate(q, e.ObjectNew)
	}
}

func (instanceHandler) Delete(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	enqueueTemplate(q, e.Object)
}

func (instanceHandler) Generic(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	enqueueTemplate(q, e.Object)
}

func templateOf(o client.Object) string {
	if si, ok := o.(*oriav1alpha1.ScopeInstance); ok {
		return si.Spec.ScopeTemplateName
	}
	return ""
}

func enqueueTemplate(q workqueue.TypedRateLimitingInterface[reconcile.Request], o client.Object) {
	if name := templateOf(o); name != "" {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	}
}

// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=scopetemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=scopetemplates/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=scopetemplates/finalizers,verbs=update
// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=scopeinstances,verbs=get;list;watch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=get;list;watch;create;update;patch;delete;escalate;bind
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one template's inline ClusterRoles and status up to
// date (the steps below, run by reconciler.Reconcile).
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	return reconciler.Reconcile[*oriav1alpha1.ScopeTemplate, *plan, engine.Summary](ctx, req, r.Client, r)
}

// New returns an empty ScopeTemplate to read into.
func (r *Reconciler) New() *oriav1alpha1.ScopeTemplate { return &oriav1alpha1.ScopeTemplate{} }

// Deleting does nothing: a template being deleted (foreground) has its
// roles removed by the garbage collector; Cleanup finishes after it.
func (r *Reconciler) Deleting(context.Context, *oriav1alpha1.ScopeTemplate) error { return nil }

// Write writes the inline ClusterRoles, nothing for a spec error.
func (r *Reconciler) Write(ctx context.Context, t *oriav1alpha1.ScopeTemplate, p *plan) (engine.Summary, error) {
	if p.specErr != nil {
		return engine.Summary{}, nil
	}
	s := r.write(ctx, t, p)
	return s, errors.Join(s.Errors...)
}

// Status sets the template's status (computeStatus).
func (r *Reconciler) Status(t *oriav1alpha1.ScopeTemplate, p *plan, s engine.Summary, err error) {
	t.Status = computeStatus(t, p, s, err)
}

// Patch writes the status when it changed, and warns when Ready enters a
// state to look at.
func (r *Reconciler) Patch(ctx context.Context, before, after *oriav1alpha1.ScopeTemplate) (time.Duration, error) {
	return reconciler.WarnOnTransition(&r.warnings, r.Recorder, func(o *oriav1alpha1.ScopeTemplate) []metav1.Condition { return o.Status.Conditions },
		reconciler.StatusPatch(r.Client, func(o *oriav1alpha1.ScopeTemplate) any { return o.Status }))(ctx, before, after)
}

// Requeue looks again after the recheck interval at a conflict or a
// missing referenced ClusterRole (objects oria does not watch), when the
// writes relied on an expectation, and while new rules are held back for
// the ServiceAccounts of instances with a ceiling (CeilingWaitInterval).
func (r *Reconciler) Requeue(p *plan, s engine.Summary) reconciler.Requeue {
	return reconciler.In(reconciler.Soonest(reconciler.RecheckIf(len(s.Conflicts) > 0 || len(p.missing) > 0, r.recheck()), s.Recheck(),
		reconciler.RecheckIf(len(p.held) > 0, CeilingWaitInterval)))
}

func (r *Reconciler) recheck() time.Duration {
	return r.opts.ConflictRecheckInterval
}

// writer is the engine's writer of one reconcile.
func (r *Reconciler) writer() *engine.Writer {
	return r.Base.Writer(r.recheck(), 0)
}

// Cleanup removes the inline ClusterRoles of a deleted template.
// Their ownerReferences would let the garbage collector do it too; doing it
// here is immediate and works without it.
func (r *Reconciler) Cleanup(ctx context.Context, template string) error {
	roles, err := r.cachedRoles(ctx, template)
	if err != nil {
		return err
	}
	s := engine.Summarize(engine.Delete(ctx, r.writer(), roleKind.Name, roles))
	if n := s.Count[engine.Deleted]; n > 0 {
		ctrl.LoggerFrom(ctx).Info("deleted the ClusterRoles of a deleted ScopeTemplate", "count", n)
	}
	return errors.Join(s.Errors...)
}

// roleKind is how the engine writes inline roles.
var roleKind = engine.ClusterRoleKind()

// write creates, repairs or deletes the template's inline ClusterRoles as
// the plan says, and records what changed: engine.Ensure, then
// engine.Delete (engine/write.go).
func (r *Reconciler) write(ctx context.Context, t *oriav1alpha1.ScopeTemplate, p *plan) engine.Summary {
	w := r.writer()
	owns := func(o client.Object) bool { return ownership.TemplateOwns(o, t.Name) }
	// A role whose new rules are held back keeps what it has (it is not
	// stale either: it is still desired).
	desired := slices.DeleteFunc(slices.Clone(p.desired), func(cr *rbacv1.ClusterRole) bool { return p.held[cr.Name] != nil })
	ensured := engine.Ensure(ctx, w, roleKind, owns, desired, p.cached)
	deleted := engine.Delete(ctx, w, roleKind.Name, p.stale)
	r.recordEvents(t, ensured, deleted)
	return engine.Summarize(ensured, deleted)
}
