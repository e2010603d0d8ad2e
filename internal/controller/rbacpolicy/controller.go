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
	"errors"
	"fmt"
	"strings"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/manager"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/reconciler"
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

// extensionNameIndex indexes RBACPolicies by spec.extensionName, to find the
// policies of an extension when it or its CRDs change.
const extensionNameIndex = "spec.extensionName"

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
	APIScopes *manager.APIScopes
}

// Reconciler reconciles RBACPolicies.
type Reconciler struct {
	// Client reads from the cache and writes to the API server.
	Client client.Client
	// Recorder emits Events on policies.
	Recorder events.EventRecorder
	// DefaultMode: see Options.
	DefaultMode oriav1alpha1.RBACMode
	// ConflictRecheckInterval: see Options.
	ConflictRecheckInterval time.Duration
	// APIScopes tells cluster-scoped APIs from namespaced ones (nil: a
	// Reconciler of its own for the manager in SetupWithManager).
	APIScopes *manager.APIScopes
}

// SetupWithManager registers the controller and its index with mgr.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	r := &Reconciler{
		Client:      mgr.GetClient(),
		Recorder:    mgr.GetEventRecorder(RecorderName),
		DefaultMode: opts.DefaultMode,

		ConflictRecheckInterval: cmp.Or(opts.ConflictRecheckInterval, DefaultRecheckInterval),
		APIScopes:               opts.APIScopes,
	}
	if r.APIScopes == nil {
		var err error
		if r.APIScopes, err = manager.NewAPIScopesForConfig(mgr.GetConfig()); err != nil {
			return err
		}
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &oriav1alpha1.RBACPolicy{}, extensionNameIndex,
		func(o client.Object) []string { return []string{o.(*oriav1alpha1.RBACPolicy).Spec.ExtensionName} }); err != nil {
		return fmt.Errorf("indexing RBACPolicies by extension: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&oriav1alpha1.RBACPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&oriav1alpha1.ScopeTemplate{}).
		Owns(&oriav1alpha1.ScopeInstance{}).
		Watches(&ocv1.ClusterExtension{}, handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, o client.Object) []reconcile.Request { return r.policiesOf(ctx, o.GetName()) }),
			builder.WithPredicates(manager.ExtensionChanged())).
		WatchesMetadata(manager.CRDMetadata(), handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, o client.Object) []reconcile.Request {
				return r.policiesOf(ctx, o.GetLabels()[oriav1alpha1.LabelOLMOwnerName])
			})).
		WithOptions(controller.Options{MaxConcurrentReconciles: cmp.Or(opts.MaxConcurrentReconciles, DefaultMaxConcurrentReconciles)}).
		Complete(r)
}

// policiesOf returns a request for every policy of the named extension.
func (r *Reconciler) policiesOf(ctx context.Context, extension string) []reconcile.Request {
	if extension == "" {
		return nil
	}
	return reconciler.Requests(ctx, r.Client, &oriav1alpha1.RBACPolicyList{}, client.MatchingFields{extensionNameIndex: extension})
}

// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=rbacpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=rbacpolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=scopetemplates;scopeinstances,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=olm.operatorframework.io,resources=clusterextensions,verbs=get;list;watch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile compiles one policy and reports its state.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	steps := &reconciler.Steps[*oriav1alpha1.RBACPolicy, *plan, result]{
		Client:  r.Client,
		New:     func() *oriav1alpha1.RBACPolicy { return &oriav1alpha1.RBACPolicy{} },
		Cleanup: r.reconcileDelete,
		// Being deleted: the garbage collector removes the owned template
		// and instance (and through them the bindings); Cleanup finishes
		// the job when the policy is gone.
		Gather: r.gather,
		Write:  r.act,
		Status: func(policy *oriav1alpha1.RBACPolicy, p *plan, out result, err error) {
			policy.Status = computeStatus(policy, p, out, err)
		},
		Patch: reconciler.StatusPatch(r.Client, func(o *oriav1alpha1.RBACPolicy) any { return o.Status }),
		Requeue: func(p *plan, out result) time.Duration {
			recheck := cmp.Or(r.ConflictRecheckInterval, DefaultRecheckInterval)
			if p.scopesPending {
				return min(manager.ScopesRecheck, recheck)
			}
			return reconciler.RecheckIf(out.conflict != "", recheck)
		},
	}
	return steps.Reconcile(ctx, req)
}

// reconcileDelete removes the objects compiled from a deleted policy. The
// ownerReferences would let the garbage collector do it too; doing it here
// makes revocation immediate and works without the garbage collector.
func (r *Reconciler) reconcileDelete(ctx context.Context, policy string) error {
	return r.deleteCompiled(ctx, policy, "")
}

// deleteCompiled deletes the ScopeTemplate and ScopeInstance compiled from
// the named policy (only objects carrying its label, and, when uid is set,
// controlled by it). It reports whether anything was deleted through events
// on the policy when one is given.
func (r *Reconciler) deleteCompiled(ctx context.Context, policy string, uid types.UID) error {
	sel := client.MatchingLabels(PolicyLabels(policy))
	var errs []error
	var instances oriav1alpha1.ScopeInstanceList
	if err := r.Client.List(ctx, &instances, sel); err != nil {
		return fmt.Errorf("listing ScopeInstances of RBACPolicy %q: %w", policy, err)
	}
	for i := range instances.Items {
		errs = append(errs, r.deleteIfOwned(ctx, &instances.Items[i], uid))
	}
	var templates oriav1alpha1.ScopeTemplateList
	if err := r.Client.List(ctx, &templates, sel); err != nil {
		return fmt.Errorf("listing ScopeTemplates of RBACPolicy %q: %w", policy, err)
	}
	for i := range templates.Items {
		errs = append(errs, r.deleteIfOwned(ctx, &templates.Items[i], uid))
	}
	return errors.Join(errs...)
}

func (r *Reconciler) deleteIfOwned(ctx context.Context, obj client.Object, uid types.UID) error {
	if uid != "" && !ownership.ControlledByUID(obj, uid) {
		return nil
	}
	if err := r.Client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %T %q: %w", obj, obj.GetName(), err)
	}
	return nil
}

// result is what act did.
type result struct {
	// conflict names the same-name objects the policy does not control.
	conflict string
	// instance is the compiled ScopeInstance as the cache shows it (nil
	// before it exists).
	instance *oriav1alpha1.ScopeInstance
}

// act carries out the plan's decision: apply the compiled objects, revoke
// them, or leave everything as it is.
func (r *Reconciler) act(ctx context.Context, policy *oriav1alpha1.RBACPolicy, p *plan) (result, error) {
	switch p.decision {
	case decisionRevoke:
		return result{}, r.revoke(ctx, policy, p.message)
	case decisionApply:
	default:
		return result{}, nil
	}
	conflict, err := r.apply(ctx, policy, p.compiled)
	if err != nil || conflict != "" {
		if conflict != "" {
			r.Recorder.Eventf(policy, nil, corev1.EventTypeWarning, oriav1alpha1.ReasonConflict, "Compile", conflict)
		}
		return result{conflict: conflict}, err
	}
	inst := &oriav1alpha1.ScopeInstance{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(p.compiled.Instance), inst); err != nil {
		if apierrors.IsNotFound(err) {
			// Just created; the cache has not seen it yet. Its creation
			// event requeues the policy.
			return result{}, nil
		}
		return result{}, fmt.Errorf("getting ScopeInstance %q: %w", p.compiled.Instance.Name, err)
	}
	return result{instance: inst}, nil
}

// apply writes the compiled template and instance when they differ from
// the cluster. A same-name object the policy does not control is a conflict:
// it is named in the returned message and never modified.
func (r *Reconciler) apply(ctx context.Context, policy *oriav1alpha1.RBACPolicy, c Compiled) (string, error) {
	name := c.Template.Name
	tmpl := &oriav1alpha1.ScopeTemplate{}
	tmplErr := r.Client.Get(ctx, client.ObjectKey{Name: name}, tmpl)
	inst := &oriav1alpha1.ScopeInstance{}
	instErr := r.Client.Get(ctx, client.ObjectKey{Name: name}, inst)
	for _, e := range []error{tmplErr, instErr} {
		if e != nil && !apierrors.IsNotFound(e) {
			return "", fmt.Errorf("getting compiled objects %q: %w", name, e)
		}
	}
	var conflicts []string
	if tmplErr == nil && !ownership.ControlledByUID(tmpl, policy.UID) {
		conflicts = append(conflicts, fmt.Sprintf("ScopeTemplate %q exists and was not created by this RBACPolicy", name))
	}
	if instErr == nil && !ownership.ControlledByUID(inst, policy.UID) {
		conflicts = append(conflicts, fmt.Sprintf("ScopeInstance %q exists and was not created by this RBACPolicy", name))
	}
	if len(conflicts) > 0 {
		return strings.Join(conflicts, "; ") + "; rename or delete it", nil
	}
	if apierrors.IsNotFound(tmplErr) || !upToDate(tmpl, c.Template, &tmpl.Spec, &c.Template.Spec) {
		if err := r.applyObject(ctx, c.Template); err != nil {
			return "", err
		}
		r.Recorder.Eventf(policy, nil, corev1.EventTypeNormal, "Compiled", "Apply",
			"ScopeTemplate %q binds %d ClusterRoles for %d APIs", name, len(c.Roles), len(c.APIs))
	}
	if apierrors.IsNotFound(instErr) || !upToDate(inst, c.Instance, &inst.Spec, &c.Instance.Spec) {
		if err := r.applyObject(ctx, c.Instance); err != nil {
			return "", err
		}
		r.Recorder.Eventf(policy, nil, corev1.EventTypeNormal, "Compiled", "Apply", "ScopeInstance %q targets %s", name, describeTarget(policy))
	}
	return "", nil
}

// applyObject server-side applies a compiled object with oria's field owner.
func (r *Reconciler) applyObject(ctx context.Context, obj client.Object) error {
	ac, err := engine.ApplyConfiguration(obj)
	if err != nil {
		return err
	}
	if err := r.Client.Apply(ctx, ac, client.FieldOwner(oriav1alpha1.FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %q: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
	}
	return nil
}

// upToDate reports whether a compiled object already has the intended spec
// and oria's labels, so that an unchanged world causes no write.
func upToDate(obj, want metav1.Object, have, wantSpec any) bool {
	return ownership.HasLabels(obj.GetLabels(), want.GetLabels()) && equality.Semantic.DeepEqual(have, wantSpec)
}

// revoke removes the compiled objects of a policy that currently grants
// nothing, emitting an event (saying why) when there was something to
// remove.
func (r *Reconciler) revoke(ctx context.Context, policy *oriav1alpha1.RBACPolicy, why string) error {
	var existing oriav1alpha1.ScopeInstanceList
	if err := r.Client.List(ctx, &existing, client.MatchingLabels(PolicyLabels(policy.Name))); err != nil {
		return fmt.Errorf("listing ScopeInstances of RBACPolicy %q: %w", policy.Name, err)
	}
	var templates oriav1alpha1.ScopeTemplateList
	if err := r.Client.List(ctx, &templates, client.MatchingLabels(PolicyLabels(policy.Name))); err != nil {
		return fmt.Errorf("listing ScopeTemplates of RBACPolicy %q: %w", policy.Name, err)
	}
	if len(existing.Items) == 0 && len(templates.Items) == 0 {
		return nil
	}
	if err := r.deleteCompiled(ctx, policy.Name, policy.UID); err != nil {
		return err
	}
	r.Recorder.Eventf(policy, nil, corev1.EventTypeNormal, "Revoked", "Delete", "removed the grant: %s", why)
	return nil
}

func describeTarget(policy *oriav1alpha1.RBACPolicy) string {
	switch {
	case len(policy.Spec.Namespaces) == 0 && policy.Spec.NamespaceSelector == nil:
		return "the whole cluster"
	case policy.Spec.NamespaceSelector == nil:
		return fmt.Sprintf("namespaces %s", strings.Join(policy.Spec.Namespaces, ", "))
	default:
		sel, _ := metav1.LabelSelectorAsSelector(policy.Spec.NamespaceSelector)
		if len(policy.Spec.Namespaces) == 0 {
			return fmt.Sprintf("namespaces matching %q", sel.String())
		}
		return fmt.Sprintf("namespaces %s and those matching %q", strings.Join(policy.Spec.Namespaces, ", "), sel.String())
	}
}
