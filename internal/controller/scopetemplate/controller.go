// Package scopetemplate implements the ScopeTemplate controller.
//
// A ScopeTemplate lists ClusterRoles (inline, with rules, or references to
// existing roles by name) and the subjects to bind them to. This controller
// validates the template and owns its inline ClusterRoles: they exist only
// while at least one ScopeInstance uses the template, and are deleted when
// none does (as the design document asks). Referenced roles are never
// touched. The ScopeInstance controller writes the bindings.
//
// The status reports validity (Ready with reason Valid, InvalidSpec,
// InvalidSubject, Conflict or ReconcileError), the instances that use the
// template and the resolved role names, in spec order. An invalid template
// changes nothing: the roles that exist stay as they are until the spec is
// fixed.
package scopetemplate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/status"
)

// Event reasons.
const (
	EventClusterRolesCreated = "ClusterRolesCreated"
	EventClusterRolesUpdated = "ClusterRolesUpdated"
	EventClusterRolesDeleted = "ClusterRolesDeleted"
	EventConflict            = "Conflict"
)

// DefaultConflictRecheckInterval is how often a template in conflict looks
// again: the conflicting ClusterRole is not oria's, so oria's cache does not
// show it and no event announces that it is gone.
const DefaultConflictRecheckInterval = 30 * time.Second

// Options configure the controller.
type Options struct {
	// MaxConcurrentReconciles is the number of workers.
	MaxConcurrentReconciles int
	// ConflictRecheckInterval: see DefaultConflictRecheckInterval (the
	// default when 0).
	ConflictRecheckInterval time.Duration
}

// Reconciler reconciles ScopeTemplates.
type Reconciler struct {
	// Client reads from the cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server: a ClusterRole without oria's
	// labels is not in the cache.
	APIReader client.Reader
	// Recorder emits Events on templates.
	Recorder events.EventRecorder
	// ConflictRecheckInterval: see Options.
	ConflictRecheckInterval time.Duration
}

// SetupWithManager registers the controller (and the shared binding
// indexes) with mgr.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	if err := binding.SetupIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	r := &Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("oria-scopetemplate"),

		ConflictRecheckInterval: opts.ConflictRecheckInterval,
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("scopetemplate").
		For(&oriav1alpha1.ScopeTemplate{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&rbacv1.ClusterRole{}).
		Watches(&oriav1alpha1.ScopeInstance{}, instanceHandler{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles}).
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

// Reconcile brings one template's inline ClusterRoles and status up to date.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ ctrl.Result, retErr error) {
	t := &oriav1alpha1.ScopeTemplate{}
	if err := r.Client.Get(ctx, req.NamespacedName, t); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.reconcileDelete(ctx, req.Name)
		}
		return ctrl.Result{}, err
	}
	if !t.DeletionTimestamp.IsZero() {
		// Being deleted (foreground): the garbage collector removes the
		// roles it owns; the NotFound pass cleans up after it.
		return ctrl.Result{}, nil
	}
	before := t.DeepCopy()
	defer func() {
		if err := r.patchStatus(ctx, before, t); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()
	if err := r.reconcileNormal(ctx, t); err != nil {
		setReadyCondition(t, metav1.ConditionUnknown, oriav1alpha1.ReasonReconcileError, err.Error())
		return ctrl.Result{}, err
	}
	if c := meta.FindStatusCondition(t.Status.Conditions, oriav1alpha1.TypeReady); c != nil && c.Reason == oriav1alpha1.ReasonConflict {
		return ctrl.Result{RequeueAfter: r.conflictRecheckInterval()}, nil
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) conflictRecheckInterval() time.Duration {
	if r.ConflictRecheckInterval > 0 {
		return r.ConflictRecheckInterval
	}
	return DefaultConflictRecheckInterval
}

// reconcileDelete removes the inline ClusterRoles of a deleted template.
// Their ownerReferences would let the garbage collector do it too; doing it
// here is immediate and works without it.
func (r *Reconciler) reconcileDelete(ctx context.Context, template string) error {
	roles, err := r.cachedRoles(ctx, template)
	if err != nil {
		return err
	}
	s := binding.Summarize(binding.Delete(ctx, r.writer(), binding.ClusterRoleKind.Name, roles))
	if n := s.Count[binding.Deleted]; n > 0 {
		ctrl.LoggerFrom(ctx).Info("deleted the ClusterRoles of a deleted ScopeTemplate", "count", n)
	}
	return errors.Join(s.Errors...)
}

// reconcileNormal validates the template, then creates, repairs or deletes
// its inline ClusterRoles depending on whether an instance uses it.
func (r *Reconciler) reconcileNormal(ctx context.Context, t *oriav1alpha1.ScopeTemplate) error {
	t.Status.ObservedGeneration = t.Generation

	var instances oriav1alpha1.ScopeInstanceList
	if err := r.Client.List(ctx, &instances, client.MatchingFields{binding.IndexScopeTemplateName: t.Name}); err != nil {
		return fmt.Errorf("listing the ScopeInstances of the template: %w", err)
	}
	t.Status.Instances = nil
	for _, si := range instances.Items {
		t.Status.Instances = append(t.Status.Instances, si.Name)
	}
	slices.Sort(t.Status.Instances)

	// Spec errors are terminal and change nothing: the roles that exist
	// keep granting what they granted until the template is fixed.
	if serr := binding.ValidateTemplate(t); serr != nil {
		setReadyCondition(t, metav1.ConditionFalse, serr.Reason, serr.Message)
		return nil
	}
	t.Status.ClusterRoles = binding.RoleNames(binding.Roles(t))

	var desired []*rbacv1.ClusterRole
	if len(instances.Items) > 0 {
		desired = binding.ClusterRoles(t)
	}
	cached := map[types.NamespacedName]*rbacv1.ClusterRole{}
	for _, want := range desired {
		cur := &rbacv1.ClusterRole{}
		if err := r.Client.Get(ctx, binding.Key(want), cur); err == nil {
			cached[binding.Key(want)] = cur
		} else if !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading ClusterRole %q: %w", want.Name, err)
		}
	}
	ensured := binding.Ensure(ctx, r.writer(), binding.ClusterRoleKind, t.Name, desired, cached)

	// Roles of this template that are no longer intended: removed from the
	// spec, renamed, or the template is no longer used.
	existing, err := r.cachedRoles(ctx, t.Name)
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, want := range desired {
		keep[want.Name] = true
	}
	var stale []*rbacv1.ClusterRole
	for _, cr := range existing {
		if !keep[cr.Name] {
			stale = append(stale, cr)
		}
	}
	deleted := binding.Delete(ctx, r.writer(), binding.ClusterRoleKind.Name, stale)

	r.recordEvents(t, ensured, deleted)
	s := binding.Summarize(ensured, deleted)
	if len(s.Errors) > 0 {
		return errors.Join(s.Errors...)
	}
	switch {
	case len(s.Conflicts) > 0:
		setReadyCondition(t, metav1.ConditionFalse, oriav1alpha1.ReasonConflict, conflictMessage(s.Conflicts))
	case len(instances.Items) == 0:
		setReadyCondition(t, metav1.ConditionTrue, oriav1alpha1.ReasonValid,
			"valid; not used by any ScopeInstance, so its inline ClusterRoles do not exist")
	case len(desired) == 0:
		setReadyCondition(t, metav1.ConditionTrue, oriav1alpha1.ReasonValid,
			fmt.Sprintf("valid; used by %d ScopeInstance(s); it has no inline ClusterRoles", len(instances.Items)))
	default:
		setReadyCondition(t, metav1.ConditionTrue, oriav1alpha1.ReasonValid,
			fmt.Sprintf("valid; %d inline ClusterRole(s) in place for %d ScopeInstance(s)", len(desired), len(instances.Items)))
	}
	return nil
}

// cachedRoles returns the cached ClusterRoles labelled as the template's
// and not controlled by another template.
func (r *Reconciler) cachedRoles(ctx context.Context, template string) ([]*rbacv1.ClusterRole, error) {
	var list rbacv1.ClusterRoleList
	if err := r.Client.List(ctx, &list, client.MatchingLabels(binding.TemplateLabels(template))); err != nil {
		return nil, fmt.Errorf("listing the ClusterRoles of ScopeTemplate %q: %w", template, err)
	}
	var out []*rbacv1.ClusterRole
	for i := range list.Items {
		cr := &list.Items[i]
		if owner := binding.ControllerName(cr.OwnerReferences, binding.KindScopeTemplate); owner == "" || owner == template {
			out = append(out, cr)
		}
	}
	return out, nil
}

func (r *Reconciler) writer() *binding.Writer {
	return &binding.Writer{Client: r.Client, Reader: r.APIReader}
}

// recordEvents emits one Event per kind of change, naming the roles.
func (r *Reconciler) recordEvents(t *oriav1alpha1.ScopeTemplate, ensured, deleted []binding.Outcome) {
	if r.Recorder == nil {
		return
	}
	byAction := map[binding.Action][]string{}
	for _, list := range [][]binding.Outcome{ensured, deleted} {
		for _, o := range list {
			byAction[o.Action] = append(byAction[o.Action], o.Name)
		}
	}
	for _, e := range []struct {
		action binding.Action
		reason string
		verb   string
		past   string
	}{
		{binding.Created, EventClusterRolesCreated, "Create", "created"},
		{binding.Updated, EventClusterRolesUpdated, "Update", "updated"},
		{binding.Deleted, EventClusterRolesDeleted, "Delete", "deleted"},
	} {
		if names := byAction[e.action]; len(names) > 0 {
			r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, e.reason, e.verb,
				"%s %d ClusterRole(s): %s", e.past, len(names), binding.Enumerate(names, 10))
		}
	}
	// A conflict is news when the template was not already reporting it;
	// every recheck would otherwise repeat the warning.
	prev := meta.FindStatusCondition(t.Status.Conditions, oriav1alpha1.TypeReady)
	if names := byAction[binding.Conflict]; len(names) > 0 && (prev == nil || prev.Reason != oriav1alpha1.ReasonConflict) {
		r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, EventConflict, "Create",
			"ClusterRole(s) %s exist and were not created by oria for this template; left unchanged", binding.Enumerate(names, 10))
	}
}

func conflictMessage(conflicts []error) string {
	msgs := make([]string, len(conflicts))
	for i, c := range conflicts {
		msgs[i] = c.Error()
	}
	return binding.Enumerate(msgs, 5) + "; rename the role in the template or remove the other object"
}

// setReadyCondition sets the Ready condition, with the generation it
// describes.
func setReadyCondition(t *oriav1alpha1.ScopeTemplate, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&t.Status.Conditions, metav1.Condition{
		Type:               oriav1alpha1.TypeReady,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: t.Generation,
	})
}

// patchStatus writes the status when it changed, and only then.
func (r *Reconciler) patchStatus(ctx context.Context, before, after *oriav1alpha1.ScopeTemplate) error {
	return status.Patch(ctx, r.Client, before, after, func(t *oriav1alpha1.ScopeTemplate) any { return t.Status })
}
