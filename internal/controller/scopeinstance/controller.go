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
// Writes are fanned out over a bounded worker pool (package binding); the
// client's QPS and burst are the throttle. A failure or a conflict in one
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
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/manager"
	"github.com/operator-framework/oria/internal/names"
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

// DefaultConflictRecheckInterval is how often an instance in conflict looks
// again: the conflicting object is not oria's, so oria's cache does not show
// it and no event announces that it is gone.
const DefaultConflictRecheckInterval = 30 * time.Second

// Options configure the controller.
type Options struct {
	// MaxConcurrentReconciles is the number of workers.
	MaxConcurrentReconciles int
	// Workers bounds the parallel writes of one reconcile
	// (binding.DefaultWorkers when 0).
	Workers int
	// ConflictRecheckInterval: see DefaultConflictRecheckInterval (the
	// default when 0).
	ConflictRecheckInterval time.Duration
}

// Reconciler reconciles ScopeInstances.
type Reconciler struct {
	// Client reads from the cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server: objects without oria's labels
	// are not in the cache.
	APIReader client.Reader
	// Recorder emits Events on instances.
	Recorder events.EventRecorder
	// Workers: see Options.
	Workers int
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
		Recorder:  mgr.GetEventRecorder("oria-scopeinstance"),
		Workers:   opts.Workers,

		ConflictRecheckInterval: opts.ConflictRecheckInterval,
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("scopeinstance").
		For(&oriav1alpha1.ScopeInstance{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&rbacv1.RoleBinding{}).
		Owns(&rbacv1.ClusterRoleBinding{}).
		Watches(&oriav1alpha1.ScopeTemplate{},
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				return r.instancesOf(ctx, o.GetName())
			}),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&rbacv1.ClusterRole{},
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				return r.instancesOf(ctx, binding.ControllerName(o.GetOwnerReferences(), binding.KindScopeTemplate))
			})).
		WatchesMetadata(manager.NamespaceMetadata(), &namespaceHandler{r: r}).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles}).
		Complete(r)
}

// instancesOf returns a request for every instance of the named template.
func (r *Reconciler) instancesOf(ctx context.Context, template string) []reconcile.Request {
	if template == "" {
		return nil
	}
	var list oriav1alpha1.ScopeInstanceList
	if err := r.Client.List(ctx, &list, client.MatchingFields{binding.IndexScopeTemplateName: template}, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing ScopeInstances", "template", template)
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i, si := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: si.Name}}
	}
	return reqs
}

// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=scopeinstances,verbs=get;list;watch
// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=scopeinstances/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=scopeinstances/finalizers,verbs=update
// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=scopetemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings;clusterrolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=get;list;watch;bind
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one instance's bindings and status up to date.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ ctrl.Result, retErr error) {
	si := &oriav1alpha1.ScopeInstance{}
	if err := r.Client.Get(ctx, req.NamespacedName, si); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.reconcileDelete(ctx, req.Name)
		}
		return ctrl.Result{}, err
	}
	if !si.DeletionTimestamp.IsZero() {
		// Being deleted (foreground): the garbage collector removes the
		// bindings; the NotFound pass cleans up after it.
		return ctrl.Result{}, nil
	}
	before := si.DeepCopy()
	defer func() {
		if err := r.patchStatus(ctx, before, si); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()
	if err := r.reconcileNormal(ctx, si); err != nil {
		setReadyCondition(si, metav1.ConditionUnknown, oriav1alpha1.ReasonReconcileError, err.Error())
		return ctrl.Result{}, err
	}
	if c := meta.FindStatusCondition(si.Status.Conditions, oriav1alpha1.TypeReady); c != nil && c.Reason == oriav1alpha1.ReasonConflict {
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

// reconcileDelete removes the bindings of a deleted instance.
func (r *Reconciler) reconcileDelete(ctx context.Context, instance string) error {
	rbs, crbs, err := r.existingBindings(ctx, instance)
	if err != nil {
		return err
	}
	w := r.writer()
	s := binding.Summarize(
		binding.Delete(ctx, w, binding.RoleBindingKind.Name, rbs),
		binding.Delete(ctx, w, binding.ClusterRoleBindingKind.Name, crbs))
	if n := s.Count[binding.Deleted]; n > 0 {
		ctrl.LoggerFrom(ctx).Info("deleted the bindings of a deleted ScopeInstance", "count", n)
	}
	return summarizeErrors(s.Errors)
}

// plan is what one reconcile found and decided.
type plan struct {
	template *oriav1alpha1.ScopeTemplate
	// roles to bind: referenced roles and inline roles that are in place.
	roles []string
	// pending inline roles not created yet: their existing bindings stay,
	// no new ones are made.
	pending []string
	// conflicted inline roles whose name a foreign ClusterRole holds.
	conflicted []string
	targets    binding.Targets
}

// reconcileNormal resolves the template and the targets, then writes.
func (r *Reconciler) reconcileNormal(ctx context.Context, si *oriav1alpha1.ScopeInstance) error {
	si.Status.ObservedGeneration = si.Generation
	p, serr, err := r.resolve(ctx, si)
	if err != nil {
		return err
	}
	if serr != nil {
		setReadyCondition(si, metav1.ConditionFalse, serr.Reason, serr.Message)
		return nil
	}
	if p.targets.Cluster {
		si.Status.Scope = oriav1alpha1.ScopeCluster
	} else {
		si.Status.Scope = oriav1alpha1.ScopeNamespaces
	}

	subjects := p.template.Spec.BindingTemplate.Subjects
	var wantRBs []*rbacv1.RoleBinding
	var wantCRBs []*rbacv1.ClusterRoleBinding
	if p.targets.Cluster {
		wantCRBs = binding.ClusterRoleBindings(si, p.template.Name, p.roles, subjects)
	} else {
		wantRBs = binding.RoleBindings(si, p.template.Name, p.roles, subjects, p.targets.Namespaces)
	}

	rbs, crbs, err := r.existingBindings(ctx, si.Name)
	if err != nil {
		return err
	}

	keep := binding.Keep(si.Name, append(binding.Objects(wantRBs), binding.Objects(wantCRBs)...), p.targets, p.pending)
	staleRBs := binding.Stale(rbs, keep, p.targets)
	staleCRBs := binding.Stale(crbs, keep, p.targets)

	// Create and repair first, delete after, so that a changed role never
	// leaves a gap without access.
	w := r.writer()
	ensuredRBs := binding.Ensure(ctx, w, binding.RoleBindingKind, si.Name, wantRBs, byKey(rbs))
	ensuredCRBs := binding.Ensure(ctx, w, binding.ClusterRoleBindingKind, si.Name, wantCRBs, byKey(crbs))
	deletedRBs := binding.Delete(ctx, w, binding.RoleBindingKind.Name, staleRBs)
	deletedCRBs := binding.Delete(ctx, w, binding.ClusterRoleBindingKind.Name, staleCRBs)
	s := binding.Summarize(ensuredRBs, ensuredCRBs, deletedRBs, deletedCRBs)
	conflicts := make([]string, 0, len(p.conflicted)+len(s.Conflicts))
	for _, role := range p.conflicted {
		conflicts = append(conflicts, fmt.Sprintf("ClusterRole %q of ScopeTemplate %q exists and was not created by oria for the template", role, p.template.Name))
	}
	for _, c := range s.Conflicts {
		conflicts = append(conflicts, c.Error())
	}
	r.recordEvents(si, ensuredRBs, ensuredCRBs, deletedRBs, deletedCRBs, conflicts)

	r.setStatus(si, p, ensuredRBs, s, conflicts, byKey(rbs))
	return summarizeErrors(s.Errors)
}

// setStatus reports the outcome of the writes: the namespaces where every
// intended binding is in place and the Ready condition. Failed writes are
// returned as the reconcile's error (ReconcileError) by the caller.
func (r *Reconciler) setStatus(si *oriav1alpha1.ScopeInstance, p *plan, ensuredRBs []binding.Outcome, s binding.Summary, conflicts []string, existingRBs map[types.NamespacedName]*rbacv1.RoleBinding) {
	si.Status.BoundNamespaces = nil
	if !p.targets.Cluster {
		skipped := map[string]bool{}
		for _, o := range ensuredRBs {
			if o.Action == binding.Skipped {
				skipped[o.Namespace] = true
			}
		}
		for _, ns := range p.targets.Namespaces {
			if s.Bad[ns] || skipped[ns] || !pendingBound(si.Name, ns, p.pending, existingRBs) {
				continue
			}
			si.Status.BoundNamespaces = append(si.Status.BoundNamespaces, ns)
		}
	}
	si.Status.BoundNamespaceCount = int32(len(si.Status.BoundNamespaces))

	switch {
	case len(s.Errors) > 0:
		// The caller sets ReconcileError from the returned error.
	case len(conflicts) > 0:
		setReadyCondition(si, metav1.ConditionFalse, oriav1alpha1.ReasonConflict,
			binding.Enumerate(conflicts, 5)+"; oria leaves such objects alone: remove or rename them")
	case len(p.targets.Missing) > 0:
		setReadyCondition(si, metav1.ConditionFalse, oriav1alpha1.ReasonNamespaceNotFound,
			fmt.Sprintf("namespace(s) %s do not exist; they are bound as soon as they are created (bound in %d other namespace(s))",
				binding.Enumerate(p.targets.Missing, 10), len(si.Status.BoundNamespaces)))
	case len(p.pending) > 0:
		msg := fmt.Sprintf("waiting for the ScopeTemplate controller to create ClusterRole(s) %s", binding.Enumerate(p.pending, 10))
		// If the template says why it cannot, say it here too.
		if c := meta.FindStatusCondition(p.template.Status.Conditions, oriav1alpha1.TypeReady); c != nil && c.Status != metav1.ConditionTrue {
			msg += fmt.Sprintf(" (ScopeTemplate %q: %s: %s)", p.template.Name, c.Reason, c.Message)
		}
		setReadyCondition(si, metav1.ConditionFalse, oriav1alpha1.ReasonProgressing, msg)
	case p.targets.Cluster:
		setReadyCondition(si, metav1.ConditionTrue, oriav1alpha1.ReasonBound,
			fmt.Sprintf("%d ClusterRole(s) bound cluster-wide", len(p.roles)))
	default:
		setReadyCondition(si, metav1.ConditionTrue, oriav1alpha1.ReasonBound,
			fmt.Sprintf("%d ClusterRole(s) bound in %d namespace(s)", len(p.roles), len(si.Status.BoundNamespaces)))
	}
}

// resolve reads the template, checks the spec and finds the targets. A
// SpecError is the user's to fix; an error is retried.
func (r *Reconciler) resolve(ctx context.Context, si *oriav1alpha1.ScopeInstance) (*plan, *binding.SpecError, error) {
	if _, serr := binding.Selector(si.Spec); serr != nil {
		return nil, serr, nil
	}
	t := &oriav1alpha1.ScopeTemplate{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: si.Spec.ScopeTemplateName}, t); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &binding.SpecError{Reason: oriav1alpha1.ReasonTemplateNotFound, Message: fmt.Sprintf(
				"ScopeTemplate %q does not exist; existing bindings are kept until it does or the instance is deleted", si.Spec.ScopeTemplateName)}, nil
		}
		return nil, nil, fmt.Errorf("reading ScopeTemplate %q: %w", si.Spec.ScopeTemplateName, err)
	}
	if serr := binding.ValidateTemplate(t); serr != nil {
		return nil, &binding.SpecError{Reason: oriav1alpha1.ReasonTemplateInvalid, Message: fmt.Sprintf(
			"ScopeTemplate %q is not valid (%s: %s); existing bindings are kept until it is fixed", t.Name, serr.Reason, serr.Message)}, nil
	}
	p := &plan{template: t}
	if binding.IsClusterWide(si.Spec) {
		if serr := binding.ValidateClusterSubjects(t.Spec.BindingTemplate.Subjects); serr != nil {
			serr.Message = fmt.Sprintf("ScopeTemplate %q: %s", t.Name, serr.Message)
			return nil, serr, nil
		}
		p.targets = binding.Targets{Cluster: true}
	} else {
		nss, err := r.namespaces(ctx)
		if err != nil {
			return nil, nil, err
		}
		targets, serr := binding.ResolveTargets(si.Spec, nss)
		if serr != nil {
			return nil, serr, nil
		}
		p.targets = targets
	}
	for _, role := range binding.Roles(t) {
		if !role.Inline {
			p.roles = append(p.roles, role.Name)
			continue
		}
		state, err := r.inlineRoleState(ctx, t.Name, role.Name)
		if err != nil {
			return nil, nil, err
		}
		switch state {
		case roleReady:
			p.roles = append(p.roles, role.Name)
		case rolePending:
			p.pending = append(p.pending, role.Name)
		case roleConflict:
			p.conflicted = append(p.conflicted, role.Name)
		}
	}
	return p, nil, nil
}

type roleState int

const (
	roleReady roleState = iota
	rolePending
	roleConflict
)

// inlineRoleState tells whether an inline role of template is in place
// (oria's, for this template), not created yet, or held by someone else.
func (r *Reconciler) inlineRoleState(ctx context.Context, template, role string) (roleState, error) {
	cr := &rbacv1.ClusterRole{}
	err := r.Client.Get(ctx, types.NamespacedName{Name: role}, cr)
	if apierrors.IsNotFound(err) {
		// Not in oria's cache: absent, or without oria's labels.
		err = r.APIReader.Get(ctx, types.NamespacedName{Name: role}, cr)
		if apierrors.IsNotFound(err) {
			return rolePending, nil
		}
	}
	if err != nil {
		return 0, fmt.Errorf("reading ClusterRole %q: %w", role, err)
	}
	if binding.ClusterRoleOwned(cr, template) {
		return roleReady, nil
	}
	return roleConflict, nil
}

// namespaces returns every namespace from the metadata cache.
func (r *Reconciler) namespaces(ctx context.Context) ([]binding.Namespace, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	out := make([]binding.Namespace, len(list.Items))
	for i, ns := range list.Items {
		out[i] = binding.Namespace{Name: ns.Name, Labels: ns.Labels, Terminating: !ns.DeletionTimestamp.IsZero()}
	}
	return out, nil
}

// existingBindings returns the cached bindings of the named instance.
func (r *Reconciler) existingBindings(ctx context.Context, instance string) ([]*rbacv1.RoleBinding, []*rbacv1.ClusterRoleBinding, error) {
	sel := client.MatchingFields{binding.IndexScopeInstance: names.LabelValue(instance)}
	var rbl rbacv1.RoleBindingList
	if err := r.Client.List(ctx, &rbl, sel); err != nil {
		return nil, nil, fmt.Errorf("listing the RoleBindings of ScopeInstance %q: %w", instance, err)
	}
	var crbl rbacv1.ClusterRoleBindingList
	if err := r.Client.List(ctx, &crbl, sel); err != nil {
		return nil, nil, fmt.Errorf("listing the ClusterRoleBindings of ScopeInstance %q: %w", instance, err)
	}
	var rbs []*rbacv1.RoleBinding
	for i := range rbl.Items {
		if ownedBy(&rbl.Items[i], instance) {
			rbs = append(rbs, &rbl.Items[i])
		}
	}
	var crbs []*rbacv1.ClusterRoleBinding
	for i := range crbl.Items {
		if ownedBy(&crbl.Items[i], instance) {
			crbs = append(crbs, &crbl.Items[i])
		}
	}
	return rbs, crbs, nil
}

// ownedBy filters out a binding whose label value matches but that another
// instance controls (label values of long names are hashed).
func ownedBy(obj client.Object, instance string) bool {
	owner := binding.ControllerName(obj.GetOwnerReferences(), binding.KindScopeInstance)
	return owner == "" || owner == instance
}

// pendingBound reports whether the bindings of the pending roles exist in
// ns (kept from before), so that ns is still fully bound.
func pendingBound(instance, ns string, pending []string, existing map[types.NamespacedName]*rbacv1.RoleBinding) bool {
	for _, role := range pending {
		if _, ok := existing[types.NamespacedName{Namespace: ns, Name: binding.BindingName(instance, role)}]; !ok {
			return false
		}
	}
	return true
}

func (r *Reconciler) writer() *binding.Writer {
	return &binding.Writer{Client: r.Client, Reader: r.APIReader, Workers: r.Workers}
}

func byKey[T client.Object](objs []T) map[types.NamespacedName]T {
	m := make(map[types.NamespacedName]T, len(objs))
	for _, o := range objs {
		m[binding.Key(o)] = o
	}
	return m
}

// summarizeErrors returns one error for many failed writes, naming the
// first few, so a status message stays readable when a thousand namespaces
// fail the same way.
func summarizeErrors(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	if len(errs) <= 3 {
		return errors.Join(errs...)
	}
	msgs := make([]string, 3)
	for i := range msgs {
		msgs[i] = errs[i].Error()
	}
	return fmt.Errorf("%d writes failed, including: %s", len(errs), strings.Join(msgs, "; "))
}

// recordEvents emits one Event per kind of change with counts, never one
// per namespace.
func (r *Reconciler) recordEvents(si *oriav1alpha1.ScopeInstance, rbs, crbs, delRBs, delCRBs []binding.Outcome, conflicts []string) {
	if r.Recorder == nil {
		return
	}
	count := func(action binding.Action, lists ...[]binding.Outcome) (n int, nss map[string]bool) {
		nss = map[string]bool{}
		for _, l := range lists {
			for _, o := range l {
				if o.Action == action {
					n++
					if o.Namespace != "" {
						nss[o.Namespace] = true
					}
				}
			}
		}
		return n, nss
	}
	describe := func(nRB int, nss map[string]bool, nCRB int) string {
		var parts []string
		if nRB > 0 {
			parts = append(parts, fmt.Sprintf("%d RoleBinding(s) in %d namespace(s)", nRB, len(nss)))
		}
		if nCRB > 0 {
			parts = append(parts, fmt.Sprintf("%d ClusterRoleBinding(s)", nCRB))
		}
		return strings.Join(parts, " and ")
	}
	for _, e := range []struct {
		action binding.Action
		reason string
		verb   string
		past   string
		rb     []binding.Outcome
		crb    []binding.Outcome
	}{
		{binding.Created, EventBindingsCreated, "Create", "created", rbs, crbs},
		{binding.Updated, EventBindingsUpdated, "Update", "updated", rbs, crbs},
		{binding.Replaced, EventBindingsReplaced, "Replace", "replaced (roleRef changed)", rbs, crbs},
		{binding.Deleted, EventBindingsDeleted, "Delete", "deleted", delRBs, delCRBs},
	} {
		nRB, nss := count(e.action, e.rb)
		nCRB, _ := count(e.action, e.crb)
		if nRB+nCRB > 0 {
			r.Recorder.Eventf(si, nil, corev1.EventTypeNormal, e.reason, e.verb, "%s %s", e.past, describe(nRB, nss, nCRB))
		}
	}
	// A conflict is news when the instance was not already reporting it;
	// every retry would otherwise repeat the warning.
	if prev := meta.FindStatusCondition(si.Status.Conditions, oriav1alpha1.TypeReady); len(conflicts) > 0 && (prev == nil || prev.Reason != oriav1alpha1.ReasonConflict) {
		r.Recorder.Eventf(si, nil, corev1.EventTypeWarning, EventConflict, "Create", "%s; left unchanged", binding.Enumerate(conflicts, 5))
	}
}

// setReadyCondition sets the Ready condition, with the generation it
// describes.
func setReadyCondition(si *oriav1alpha1.ScopeInstance, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&si.Status.Conditions, metav1.Condition{
		Type:               oriav1alpha1.TypeReady,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: si.Generation,
	})
}

// patchStatus writes the status when it changed, and only then.
func (r *Reconciler) patchStatus(ctx context.Context, before, after *oriav1alpha1.ScopeInstance) error {
	return status.Patch(ctx, r.Client, before, after, func(si *oriav1alpha1.ScopeInstance) any { return si.Status })
}
