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
	"slices"
	"strings"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
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
	"github.com/operator-framework/oria/internal/manager"
	"github.com/operator-framework/oria/internal/status"
)

// DefaultConflictRecheckInterval is how often a policy in conflict looks
// again: the conflicting object is not the policy's, so no event tells the
// policy when it goes away.
const DefaultConflictRecheckInterval = 30 * time.Second

// extensionNameIndex indexes RBACPolicies by spec.extensionName, to find the
// policies of an extension when it or its CRDs change.
const extensionNameIndex = "spec.extensionName"

// Options configure the controller.
type Options struct {
	// DefaultMode is the RBAC mode of extensions without the annotation; it
	// must match the extension controller's.
	DefaultMode oriav1alpha1.RBACMode
	// MaxConcurrentReconciles is the number of workers.
	MaxConcurrentReconciles int
	// ConflictRecheckInterval: see DefaultConflictRecheckInterval; zero
	// means the default.
	ConflictRecheckInterval time.Duration
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
}

// SetupWithManager registers the controller and its index with mgr.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	r := &Reconciler{
		Client:      mgr.GetClient(),
		Recorder:    mgr.GetEventRecorder("oria-rbacpolicy"),
		DefaultMode: opts.DefaultMode,

		ConflictRecheckInterval: cmp.Or(opts.ConflictRecheckInterval, DefaultConflictRecheckInterval),
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &oriav1alpha1.RBACPolicy{}, extensionNameIndex,
		func(o client.Object) []string { return []string{o.(*oriav1alpha1.RBACPolicy).Spec.ExtensionName} }); err != nil {
		return fmt.Errorf("indexing RBACPolicies by extension: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("rbacpolicy").
		For(&oriav1alpha1.RBACPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&oriav1alpha1.ScopeTemplate{}).
		Owns(&oriav1alpha1.ScopeInstance{}).
		Watches(&ocv1.ClusterExtension{}, handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, o client.Object) []reconcile.Request { return r.policiesOf(ctx, o.GetName()) })).
		WatchesMetadata(manager.CRDMetadata(), handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, o client.Object) []reconcile.Request {
				return r.policiesOf(ctx, o.GetLabels()[oriav1alpha1.LabelOLMOwnerName])
			})).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles}).
		Complete(r)
}

// policiesOf returns a request for every policy of the named extension.
func (r *Reconciler) policiesOf(ctx context.Context, extension string) []reconcile.Request {
	if extension == "" {
		return nil
	}
	var list oriav1alpha1.RBACPolicyList
	if err := r.Client.List(ctx, &list, client.MatchingFields{extensionNameIndex: extension}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing RBACPolicies", "extension", extension)
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i, p := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Name}}
	}
	return reqs
}

// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=rbacpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=rbacpolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=scopetemplates;scopeinstances,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=olm.operatorframework.io,resources=clusterextensions,verbs=get;list;watch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile compiles one policy and reports its state.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ ctrl.Result, retErr error) {
	policy := &oriav1alpha1.RBACPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, policy); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.reconcileDelete(ctx, req.Name)
		}
		return ctrl.Result{}, err
	}
	if !policy.DeletionTimestamp.IsZero() {
		// The garbage collector removes the owned template and instance
		// (and through them the bindings); the NotFound pass above
		// finishes the job when the policy is gone.
		return ctrl.Result{}, nil
	}
	before := policy.DeepCopy()
	defer func() {
		if err := r.patchStatus(ctx, before, policy); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()
	if err := r.reconcileNormal(ctx, policy); err != nil {
		setReadyCondition(policy, metav1.ConditionUnknown, oriav1alpha1.ReasonReconcileError, err.Error())
		return ctrl.Result{}, err
	}
	if c := meta.FindStatusCondition(policy.Status.Conditions, oriav1alpha1.TypeReady); c != nil && c.Reason == oriav1alpha1.ReasonConflict {
		return ctrl.Result{RequeueAfter: cmp.Or(r.ConflictRecheckInterval, DefaultConflictRecheckInterval)}, nil
	}
	return ctrl.Result{}, nil
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
	if uid != "" && !ownedBy(obj, uid) {
		return nil
	}
	if err := r.Client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %T %q: %w", obj, obj.GetName(), err)
	}
	return nil
}

// reconcileNormal validates the policy, compiles it against its extension's
// current APIs, applies the result and mirrors the ScopeInstance's state.
func (r *Reconciler) reconcileNormal(ctx context.Context, policy *oriav1alpha1.RBACPolicy) error {
	policy.Status.ScopeTemplateName = ObjectName(policy.Name)
	policy.Status.ScopeInstanceName = ObjectName(policy.Name)

	// Spec errors are terminal and leave existing grants as they are: the
	// admin fixes the policy, and a typo never revokes access by surprise.
	if problems := ValidateSubjects(policy.Spec.Subjects); len(problems) > 0 {
		setReadyCondition(policy, metav1.ConditionFalse, oriav1alpha1.ReasonInvalidSubject, strings.Join(problems, "; "))
		return nil
	}
	if policy.Spec.NamespaceSelector != nil {
		if _, err := metav1.LabelSelectorAsSelector(policy.Spec.NamespaceSelector); err != nil {
			setReadyCondition(policy, metav1.ConditionFalse, oriav1alpha1.ReasonInvalidSelector, fmt.Sprintf("spec.namespaceSelector: %v", err))
			return nil
		}
	}

	ext := &ocv1.ClusterExtension{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: policy.Spec.ExtensionName}, ext); err != nil {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("getting ClusterExtension %q: %w", policy.Spec.ExtensionName, err)
		}
		clearGrant(policy)
		setReadyCondition(policy, metav1.ConditionFalse, oriav1alpha1.ReasonExtensionNotFound,
			fmt.Sprintf("ClusterExtension %q does not exist; access is granted once it is installed", policy.Spec.ExtensionName))
		return r.revoke(ctx, policy)
	}
	mode, valid := oriav1alpha1.EffectiveRBACMode(ext.Annotations, r.DefaultMode)
	switch {
	case !valid:
		setReadyCondition(policy, metav1.ConditionFalse, oriav1alpha1.ReasonExtensionUnmanaged,
			fmt.Sprintf("ClusterExtension %q has an invalid %s annotation %q; existing grants are left unchanged until it is fixed",
				ext.Name, oriav1alpha1.AnnotationRBACMode, ext.Annotations[oriav1alpha1.AnnotationRBACMode]))
		return nil
	case mode == oriav1alpha1.RBACModeUnmanaged:
		// Unmanaged means nobody but what the admin set up by hand: a
		// policy's bindings would still grant bundle-provided roles, so
		// they are removed.
		clearGrant(policy)
		setReadyCondition(policy, metav1.ConditionFalse, oriav1alpha1.ReasonExtensionUnmanaged,
			fmt.Sprintf("ClusterExtension %q is in Unmanaged mode, so oria grants nothing for it; annotate it with %s=FineGrained",
				ext.Name, oriav1alpha1.AnnotationRBACMode))
		return r.revoke(ctx, policy)
	}

	crds, err := r.extensionCRDs(ctx, ext.Name)
	if err != nil {
		return err
	}
	compiled := Compile(policy, crds)
	policy.Status.APIs = compiled.APIs
	if compiled.Template == nil {
		clearGrant(policy)
		msg := fmt.Sprintf("ClusterExtension %q provides no API", ext.Name)
		if len(compiled.Missing) > 0 {
			msg = fmt.Sprintf("ClusterExtension %q does not provide %s", ext.Name, strings.Join(compiled.Missing, ", "))
		}
		setReadyCondition(policy, metav1.ConditionFalse, oriav1alpha1.ReasonAPINotFound, msg)
		return r.revoke(ctx, policy)
	}

	if conflict, err := r.apply(ctx, policy, compiled); err != nil || conflict != "" {
		if conflict != "" {
			setReadyCondition(policy, metav1.ConditionFalse, oriav1alpha1.ReasonConflict, conflict)
			r.Recorder.Eventf(policy, nil, corev1.EventTypeWarning, oriav1alpha1.ReasonConflict, "Compile", conflict)
		}
		return err
	}
	return r.mirrorInstance(ctx, policy, compiled)
}

// extensionCRDs returns the sorted names of the CRDs operator-controller
// installed for the extension (from the metadata-only CRD cache).
func (r *Reconciler) extensionCRDs(ctx context.Context, extension string) ([]string, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(manager.CRDMetadata().GroupVersionKind().GroupVersion().WithKind("CustomResourceDefinitionList"))
	if err := r.Client.List(ctx, list, client.MatchingLabels{
		oriav1alpha1.LabelOLMOwnerKind: oriav1alpha1.OLMOwnerKindClusterExtension,
		oriav1alpha1.LabelOLMOwnerName: extension,
	}); err != nil {
		return nil, fmt.Errorf("listing CRDs of ClusterExtension %q: %w", extension, err)
	}
	out := make([]string, 0, len(list.Items))
	for _, crd := range list.Items {
		if crd.DeletionTimestamp.IsZero() {
			out = append(out, crd.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// apply writes the compiled template and instance when they differ from
// the cluster. A same-name object the policy does not control is a conflict:
// it is named in the returned message and never modified.
func (r *Reconciler) apply(ctx context.Context, policy *oriav1alpha1.RBACPolicy, c Compiled) (string, error) {
	name := *c.Template.GetName()
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
	if tmplErr == nil && !ownedBy(tmpl, policy.UID) {
		conflicts = append(conflicts, fmt.Sprintf("ScopeTemplate %q exists and was not created by this RBACPolicy", name))
	}
	if instErr == nil && !ownedBy(inst, policy.UID) {
		conflicts = append(conflicts, fmt.Sprintf("ScopeInstance %q exists and was not created by this RBACPolicy", name))
	}
	if len(conflicts) > 0 {
		return strings.Join(conflicts, "; ") + "; rename or delete it", nil
	}

	wantT, err := templateSpec(c.Template)
	if err != nil {
		return "", err
	}
	if apierrors.IsNotFound(tmplErr) || !upToDate(tmpl, policy.Name, &tmpl.Spec, &wantT) {
		if err := r.Client.Apply(ctx, c.Template, client.FieldOwner(oriav1alpha1.FieldOwner), client.ForceOwnership); err != nil {
			return "", fmt.Errorf("applying ScopeTemplate %q: %w", name, err)
		}
		r.Recorder.Eventf(policy, nil, corev1.EventTypeNormal, "Compiled", "Apply",
			"ScopeTemplate %q binds %d ClusterRoles for %d APIs", name, len(c.Roles), len(c.APIs))
	}
	wantI, err := instanceSpec(c.Instance)
	if err != nil {
		return "", err
	}
	if apierrors.IsNotFound(instErr) || !upToDate(inst, policy.Name, &inst.Spec, &wantI) {
		if err := r.Client.Apply(ctx, c.Instance, client.FieldOwner(oriav1alpha1.FieldOwner), client.ForceOwnership); err != nil {
			return "", fmt.Errorf("applying ScopeInstance %q: %w", name, err)
		}
		r.Recorder.Eventf(policy, nil, corev1.EventTypeNormal, "Compiled", "Apply", "ScopeInstance %q targets %s", name, describeTarget(policy))
	}
	return "", nil
}

// upToDate reports whether a compiled object already has the intended spec
// and oria's labels, so that an unchanged world causes no write.
func upToDate(obj metav1.Object, policy string, have, want any) bool {
	for k, v := range PolicyLabels(policy) {
		if obj.GetLabels()[k] != v {
			return false
		}
	}
	return equality.Semantic.DeepEqual(have, want)
}

// revoke removes the compiled objects of a policy that currently grants
// nothing, emitting an event when there was something to remove.
func (r *Reconciler) revoke(ctx context.Context, policy *oriav1alpha1.RBACPolicy) error {
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
	r.Recorder.Eventf(policy, nil, corev1.EventTypeNormal, "Revoked", "Delete", "removed the grant: %s", meta.FindStatusCondition(policy.Status.Conditions, oriav1alpha1.TypeReady).Message)
	return nil
}

// mirrorInstance copies the ScopeInstance's progress into the policy.
func (r *Reconciler) mirrorInstance(ctx context.Context, policy *oriav1alpha1.RBACPolicy, c Compiled) error {
	inst := &oriav1alpha1.ScopeInstance{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: *c.Instance.GetName()}, inst); err != nil {
		if apierrors.IsNotFound(err) {
			// Just created; the cache has not seen it yet. Its creation
			// event requeues the policy.
			setReadyCondition(policy, metav1.ConditionFalse, oriav1alpha1.ReasonProgressing, "waiting for the ScopeInstance to be created")
			return nil
		}
		return fmt.Errorf("getting ScopeInstance %q: %w", inst.Name, err)
	}
	policy.Status.Scope = inst.Status.Scope
	policy.Status.BoundNamespaces = inst.Status.BoundNamespaces
	policy.Status.BoundNamespaceCount = inst.Status.BoundNamespaceCount

	ready := meta.FindStatusCondition(inst.Status.Conditions, oriav1alpha1.TypeReady)
	wantI, err := instanceSpec(c.Instance)
	if err != nil {
		return err
	}
	switch {
	case ready == nil || ready.ObservedGeneration != inst.Generation || !equality.Semantic.DeepEqual(inst.Spec, wantI):
		setReadyCondition(policy, metav1.ConditionFalse, oriav1alpha1.ReasonProgressing,
			fmt.Sprintf("waiting for ScopeInstance %q to bind the roles", inst.Name))
	case ready.Status != metav1.ConditionTrue:
		setReadyCondition(policy, ready.Status, ready.Reason, fmt.Sprintf("ScopeInstance %q: %s", inst.Name, ready.Message))
	case len(c.Missing) > 0:
		setReadyCondition(policy, metav1.ConditionFalse, oriav1alpha1.ReasonAPINotFound,
			fmt.Sprintf("granted for %s, but ClusterExtension %q does not provide %s",
				strings.Join(c.APIs, ", "), policy.Spec.ExtensionName, strings.Join(c.Missing, ", ")))
	default:
		setReadyCondition(policy, metav1.ConditionTrue, oriav1alpha1.ReasonBound,
			fmt.Sprintf("%s access to %s for %d subjects %s", policy.Spec.Access, strings.Join(c.APIs, ", "),
				len(policy.Spec.Subjects), describeBound(policy)))
	}
	return nil
}

// clearGrant empties the status fields that describe a grant in place.
func clearGrant(policy *oriav1alpha1.RBACPolicy) {
	policy.Status.APIs = nil
	policy.Status.Scope = ""
	policy.Status.BoundNamespaces = nil
	policy.Status.BoundNamespaceCount = 0
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

func describeBound(policy *oriav1alpha1.RBACPolicy) string {
	if policy.Status.Scope == oriav1alpha1.ScopeCluster {
		return "cluster-wide"
	}
	return fmt.Sprintf("in %d namespaces", policy.Status.BoundNamespaceCount)
}

// setReadyCondition sets the policy's Ready condition for its generation.
func setReadyCondition(policy *oriav1alpha1.RBACPolicy, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&policy.Status.Conditions, metav1.Condition{
		Type:               oriav1alpha1.TypeReady,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: policy.Generation,
	})
}

// patchStatus writes the status when it changed.
func (r *Reconciler) patchStatus(ctx context.Context, before, policy *oriav1alpha1.RBACPolicy) error {
	policy.Status.ObservedGeneration = policy.Generation
	return status.Patch(ctx, r.Client, before, policy, func(p *oriav1alpha1.RBACPolicy) any { return p.Status })
}
