// Package extension generates ClusterRoles for every API a ClusterExtension
// provides and, in Legacy mode, aggregates them into the built-in admin, edit
// and view ClusterRoles. The mode comes from the rbac-mode annotation on the
// ClusterExtension (or the controller's default); the result is reported on
// the ClusterExtension as oria's own RBACManaged condition.
package extension

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/manager"
	"github.com/operator-framework/oria/internal/names"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "clusterextension-rbac"

// Event reasons on the ClusterExtension.
const (
	EventRoleCreated    = "ClusterRoleCreated"
	EventRoleUpdated    = "ClusterRoleUpdated"
	EventRoleDeleted    = "ClusterRoleDeleted"
	EventBundleLabelled = "BundleClusterRoleAggregated"
	EventBundleReleased = "BundleClusterRoleReleased"
	EventConflict       = oriav1alpha1.ReasonConflict
	EventInvalidMode    = oriav1alpha1.ReasonInvalidMode
	EventModeChanged    = "ModeChanged"
)

// DefaultConflictRetryInterval is how often an extension with a conflicting
// ClusterRole is reconciled again. Conflicting roles are not oria's and so not
// in oria's cache: nothing tells oria when one goes away.
const DefaultConflictRetryInterval = time.Minute

// writeWorkers bounds the parallel writes of one reconcile.
const writeWorkers = 16

// Options configure the controller.
type Options struct {
	// DefaultMode applies to ClusterExtensions without the rbac-mode
	// annotation.
	DefaultMode oriav1alpha1.RBACMode
	// MaxConcurrentReconciles is the number of extensions reconciled at once.
	MaxConcurrentReconciles int
	// ConflictRetryInterval: see DefaultConflictRetryInterval; zero means
	// the default.
	ConflictRetryInterval time.Duration
}

// Reconciler reconciles the ClusterRoles of one ClusterExtension and its
// RBACManaged condition. Its fields are exported so tests can build one
// around a wrapped client.
type Reconciler struct {
	// Client reads from the cache (ClusterExtensions, oria-labelled
	// ClusterRoles, metadata of CRDs installed for extensions) and writes.
	Client client.Client
	// APIReader reads objects the cache does not hold: a same-name
	// ClusterRole oria did not create, or one provided by the bundle.
	APIReader client.Reader
	// Recorder records Events on the ClusterExtension.
	Recorder events.EventRecorder
	// DefaultMode applies when the rbac-mode annotation is absent.
	DefaultMode oriav1alpha1.RBACMode
	// ConflictRetryInterval: see DefaultConflictRetryInterval; zero means
	// the default.
	ConflictRetryInterval time.Duration
}

// SetupWithManager registers the controller with mgr.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	if _, ok := oriav1alpha1.ParseRBACMode(string(opts.DefaultMode)); !ok {
		return fmt.Errorf("invalid default RBAC mode %q", opts.DefaultMode)
	}
	r := &Reconciler{
		Client:                mgr.GetClient(),
		APIReader:             mgr.GetAPIReader(),
		Recorder:              mgr.GetEventRecorder("oria"),
		DefaultMode:           opts.DefaultMode,
		ConflictRetryInterval: opts.ConflictRetryInterval,
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&ocv1.ClusterExtension{}).
		// Generated roles are controlled by their extension: a deleted or
		// edited role brings its extension back for repair.
		Owns(&rbacv1.ClusterRole{}).
		// An upgrade adds or removes CRDs: each belongs to the extension
		// its owner label names (old and new owner on an update). CRDs are
		// watched as metadata only: their schemas can be hundreds of
		// kilobytes, and names and labels are all oria needs.
		Watches(manager.CRDMetadata(), handler.EnqueueRequestsFromMapFunc(crdToExtension)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(opts.MaxConcurrentReconciles, 1)}).
		Complete(r)
}

// crdMetadataList lists CRDs as metadata only, like manager.CRDMetadata.
func crdMetadataList() *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinitionList"))
	return l
}

// crdToExtension maps a CRD to the ClusterExtension that installed it.
func crdToExtension(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[oriav1alpha1.LabelOLMOwnerKind] != oriav1alpha1.OLMOwnerKindClusterExtension || l[oriav1alpha1.LabelOLMOwnerName] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: l[oriav1alpha1.LabelOLMOwnerName]}}}
}

// +kubebuilder:rbac:groups=olm.operatorframework.io,resources=clusterextensions,verbs=get;list;watch
// +kubebuilder:rbac:groups=olm.operatorframework.io,resources=clusterextensions/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=get;list;watch;create;update;patch;delete;escalate;bind
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings the ClusterRoles of one ClusterExtension to the state
// its mode asks for and reports the result in the RBACManaged condition.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ce := &ocv1.ClusterExtension{}
	if err := r.Client.Get(ctx, req.NamespacedName, ce); err != nil {
		if apierrors.IsNotFound(err) {
			// Deleted: remove what oria generated for it now rather than
			// waiting for the garbage collector.
			return ctrl.Result{}, r.reconcileDelete(ctx, req.Name)
		}
		return ctrl.Result{}, fmt.Errorf("getting ClusterExtension %q: %w", req.Name, err)
	}
	if !ce.DeletionTimestamp.IsZero() {
		// Being uninstalled: access to its APIs goes with it.
		return ctrl.Result{}, r.reconcileDelete(ctx, ce.Name)
	}

	res, cond, err := r.reconcileNormal(ctx, ce)
	if err != nil {
		cond = metav1.Condition{
			Status:  metav1.ConditionUnknown,
			Reason:  oriav1alpha1.ReasonReconcileError,
			Message: "oria could not reconcile the ClusterRoles of this extension and retries: " + shorten(err.Error()),
		}
	}
	return res, errors.Join(err, r.setCondition(ctx, ce, cond))
}

// mode returns the RBAC mode of ce, whether it comes from the annotation,
// and whether it is valid.
func (r *Reconciler) mode(ce *ocv1.ClusterExtension) (mode oriav1alpha1.RBACMode, annotated, valid bool) {
	_, annotated = ce.Annotations[oriav1alpha1.AnnotationRBACMode]
	mode, valid = oriav1alpha1.EffectiveRBACMode(ce.Annotations, r.DefaultMode)
	return mode, annotated, valid
}

// report collects the outcome of the per-role work of one reconcile, which
// runs in parallel.
type report struct {
	mu        sync.Mutex
	conflicts []string // sentences naming conflicting roles
	bundle    []string // names of bundle-provided roles used
	errs      []error
	// changed names the roles created, updated and deleted, by event
	// reason: one Event per reason and reconcile tells them all (an
	// extension with 200 APIs would otherwise get 800 Events, doubling the
	// API server's work for a mode switch).
	changed map[string][]string
}

// changedRole records that the role name was changed (reason is
// EventRoleCreated, EventRoleUpdated or EventRoleDeleted). A nil report
// records nothing.
func (p *report) changedRole(reason, name string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.changed == nil {
		p.changed = map[string][]string{}
	}
	p.changed[reason] = append(p.changed[reason], name)
}

func (p *report) conflict(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conflicts = append(p.conflicts, fmt.Sprintf(format, args...))
}

func (p *report) bundleRole(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bundle = append(p.bundle, name)
}

func (p *report) err(err error) {
	if err == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = append(p.errs, err)
}

// slot is one role name an API of the extension may have.
type slot struct {
	crd     string
	kind    RoleKind
	name    string
	desired *rbacv1ac.ClusterRoleApplyConfiguration // nil: oria wants no role of its own here
}

// reconcileNormal syncs the roles of a live extension and returns the
// condition to report. It returns an error only for failures worth a retry.
func (r *Reconciler) reconcileNormal(ctx context.Context, ce *ocv1.ClusterExtension) (ctrl.Result, metav1.Condition, error) {
	mode, annotated, valid := r.mode(ce)
	if !valid {
		// A typo must not strip access from every user of the extension:
		// keep whatever the last valid mode generated.
		return ctrl.Result{}, metav1.Condition{
			Status: metav1.ConditionFalse,
			Reason: oriav1alpha1.ReasonInvalidMode,
			Message: fmt.Sprintf("annotation %s has the invalid value %q (valid: %s); nothing was changed and ClusterRoles generated earlier are kept",
				oriav1alpha1.AnnotationRBACMode, ce.Annotations[oriav1alpha1.AnnotationRBACMode], modeList()),
		}, nil
	}

	crds, err := r.extensionCRDs(ctx, ce.Name)
	if err != nil {
		return ctrl.Result{}, metav1.Condition{}, err
	}
	ext := Extension{Name: ce.Name, UID: ce.UID}
	desired := map[string]*rbacv1ac.ClusterRoleApplyConfiguration{}
	for _, ac := range DesiredRoles(ext, crds, mode) {
		desired[*ac.Name] = ac
	}
	var slots []slot
	for _, crd := range crds {
		for _, k := range RoleKinds {
			name := RoleName(crd, k)
			slots = append(slots, slot{crd: crd, kind: k, name: name, desired: desired[name]})
		}
	}

	rep := &report{}
	forEach(ctx, slots, func(ctx context.Context, s slot) { rep.err(r.syncSlot(ctx, ce, ext, mode, s, rep)) })
	rep.err(r.deleteStale(ctx, rep, ce.Name, desired))
	r.recordChanges(ce, rep)
	if err := errors.Join(rep.errs...); err != nil {
		return ctrl.Result{}, metav1.Condition{}, err
	}
	cond := conditionFor(mode, annotated, len(crds), rep)
	var res ctrl.Result
	if len(rep.conflicts) > 0 {
		res.RequeueAfter = cmp.Or(r.ConflictRetryInterval, DefaultConflictRetryInterval)
	}
	return res, cond, nil
}

// extensionCRDs returns the sorted names of the CRDs operator-controller
// installed for the extension named name.
func (r *Reconciler) extensionCRDs(ctx context.Context, name string) ([]string, error) {
	list := crdMetadataList()
	if err := r.Client.List(ctx, list, client.MatchingLabels{
		oriav1alpha1.LabelOLMOwnerKind: oriav1alpha1.OLMOwnerKindClusterExtension,
		oriav1alpha1.LabelOLMOwnerName: name,
	}); err != nil {
		return nil, fmt.Errorf("listing CustomResourceDefinitions of ClusterExtension %q: %w", name, err)
	}
	out := make([]string, 0, len(list.Items))
	for _, crd := range list.Items {
		if crd.DeletionTimestamp.IsZero() {
			out = append(out, crd.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// syncSlot brings one role name of the extension to the state mode asks
// for. Conflicts and bundle-provided roles are recorded in rep.
func (r *Reconciler) syncSlot(ctx context.Context, ce *ocv1.ClusterExtension, ext Extension, mode oriav1alpha1.RBACMode, s slot, rep *report) error {
	cached := &rbacv1.ClusterRole{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: s.name}, cached)
	switch {
	case err == nil:
		if !isOriaRoleOf(cached, ext.Name) {
			if s.desired != nil {
				rep.conflict("ClusterRole %q was generated by oria for another extension (%s)", s.name, ownerOf(cached))
			}
			return nil
		}
		if s.desired == nil {
			return nil // deleteStale removes it
		}
		return r.applyRole(ctx, rep, s.desired, cached)
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("getting ClusterRole %q: %w", s.name, err)
	}

	// Not in oria's cache: absent, or not (or no longer) labelled as oria's.
	live := &rbacv1.ClusterRole{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: s.name}, live); err != nil {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("getting ClusterRole %q: %w", s.name, err)
		}
		if s.desired == nil {
			return nil
		}
		return r.applyRole(ctx, rep, s.desired, nil)
	}
	switch {
	case isControlledBy(live, ext):
		// Oria's role whose labels someone removed: still oria's.
		if s.desired == nil {
			return r.deleteRole(ctx, rep, live)
		}
		return r.applyRole(ctx, rep, s.desired, live)
	case isBundleRoleOf(live, ext.Name):
		if mode == oriav1alpha1.RBACModeLegacy || mode == oriav1alpha1.RBACModeFineGrained {
			rep.bundleRole(s.name)
		}
		return r.syncBundleRole(ctx, ce, live, s.kind, mode)
	case s.desired != nil:
		rep.conflict("ClusterRole %q exists and was not created by oria", s.name)
	}
	return nil
}

// applyRole creates desired when cur is nil (the role is absent), and
// otherwise applies it when cur differs from it. What it changed is
// recorded in rep.
func (r *Reconciler) applyRole(ctx context.Context, rep *report, desired *rbacv1ac.ClusterRoleApplyConfiguration, cur *rbacv1.ClusterRole) error {
	name := *desired.Name
	if cur == nil {
		// Create, not apply: apply is an upsert, and a role someone else
		// (operator-controller installing a bundle role, say) creates
		// between oria's read and its write must fail the write rather
		// than be taken over. The next reconcile sees what it is.
		obj := clusterRoleFrom(desired)
		if err := r.Client.Create(ctx, obj, client.FieldOwner(oriav1alpha1.FieldOwner)); err != nil {
			return fmt.Errorf("creating ClusterRole %q: %w", name, err)
		}
		rep.changedRole(EventRoleCreated, name)
		return nil
	}
	if upToDate(desired, cur) {
		return nil
	}
	want := maps.Clone(desired.Labels)
	// The response is decoded into desired.
	if err := r.Client.Apply(ctx, desired, client.FieldOwner(oriav1alpha1.FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying ClusterRole %q: %w", name, err)
	}
	// Apply removes a label only when oria alone owned it; an aggregation
	// label someone else added to a FineGrained role (kubectl label) would
	// stay and widen access, so remove it explicitly.
	var extra []string
	for _, k := range knownLabels {
		if _, ok := want[k]; !ok {
			if _, has := desired.Labels[k]; has {
				extra = append(extra, k)
			}
		}
	}
	if len(extra) > 0 {
		if err := r.removeLabels(ctx, name, extra); err != nil {
			return err
		}
	}
	rep.changedRole(EventRoleUpdated, name)
	return nil
}

func (r *Reconciler) removeLabels(ctx context.Context, name string, keys []string) error {
	labels := map[string]any{}
	for _, k := range keys {
		labels[k] = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return err
	}
	if err := r.Client.Patch(ctx, roleRef(name, ""), client.RawPatch(types.MergePatchType, patch), client.FieldOwner(oriav1alpha1.FieldOwner)); err != nil {
		return fmt.Errorf("removing labels %s from ClusterRole %q: %w", strings.Join(keys, ", "), name, err)
	}
	return nil
}

// syncBundleRole adds (Legacy) or releases (other modes) the one
// aggregation label oria puts on a bundle-provided role. Everything else on
// the role belongs to the bundle and is never touched.
func (r *Reconciler) syncBundleRole(ctx context.Context, ce *ocv1.ClusterExtension, cur *rbacv1.ClusterRole, k RoleKind, mode oriav1alpha1.RBACMode) error {
	if bundleRoleUpToDate(cur, k, mode) {
		return nil
	}
	ac := BundleRoleApply(cur.Name, k, mode)
	if err := r.Client.Apply(ctx, ac, client.FieldOwner(oriav1alpha1.FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying aggregation label to bundle-provided ClusterRole %q: %w", cur.Name, err)
	}
	if mode == oriav1alpha1.RBACModeLegacy {
		r.Recorder.Eventf(ce, cur, corev1.EventTypeNormal, EventBundleLabelled, "Update",
			"Added label %s to bundle-provided ClusterRole %q", AggregationLabel(k), cur.Name)
	} else {
		r.Recorder.Eventf(ce, cur, corev1.EventTypeNormal, EventBundleReleased, "Update",
			"Released oria's labels on bundle-provided ClusterRole %q", cur.Name)
	}
	return nil
}

// deleteStale deletes the roles oria generated for the extension named name
// that are not in desired (all of them when desired is empty). Only roles
// that are oria's for this extension are considered. Deletions are recorded
// in rep; with rep nil (the extension is gone) they are not.
func (r *Reconciler) deleteStale(ctx context.Context, rep *report, name string, desired map[string]*rbacv1ac.ClusterRoleApplyConfiguration) error {
	list := &rbacv1.ClusterRoleList{}
	if err := r.Client.List(ctx, list, client.MatchingLabels{
		oriav1alpha1.LabelManagedBy: oriav1alpha1.ManagedByValue,
		oriav1alpha1.LabelExtension: names.LabelValue(name),
	}); err != nil {
		return fmt.Errorf("listing ClusterRoles of ClusterExtension %q: %w", name, err)
	}
	var stale []*rbacv1.ClusterRole
	for i := range list.Items {
		cr := &list.Items[i]
		if _, want := desired[cr.Name]; !want && isOriaRoleOf(cr, name) && cr.DeletionTimestamp.IsZero() {
			stale = append(stale, cr)
		}
	}
	var mu sync.Mutex
	var errs []error
	forEach(ctx, stale, func(ctx context.Context, cr *rbacv1.ClusterRole) {
		if err := r.deleteRole(ctx, rep, cr); err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	})
	return errors.Join(errs...)
}

// deleteRole deletes cr, only if it is still the object that was read (UID
// precondition), and records the deletion in rep (when not nil).
func (r *Reconciler) deleteRole(ctx context.Context, rep *report, cr *rbacv1.ClusterRole) error {
	err := r.Client.Delete(ctx, roleRef(cr.Name, ""), client.Preconditions{UID: &cr.UID})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Gone already, or replaced by another object that is not the
		// one oria judged its own.
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting ClusterRole %q: %w", cr.Name, err)
	}
	rep.changedRole(EventRoleDeleted, cr.Name)
	return nil
}

// roleEvents are the Events that summarise a reconcile's changes to roles,
// in the order they are recorded.
var roleEvents = []struct{ reason, action, note string }{
	{EventRoleCreated, "Create", "Created %d ClusterRole(s): %s"},
	{EventRoleUpdated, "Update", "Updated %d ClusterRole(s) to their generated state: %s"},
	{EventRoleDeleted, "Delete", "Deleted %d ClusterRole(s): %s"},
}

// maxNamesInEvent bounds the role names an Event lists.
const maxNamesInEvent = 10

// recordChanges records one Event per kind of change in rep on ce, naming
// the roles (the first maxNamesInEvent of them).
func (r *Reconciler) recordChanges(ce *ocv1.ClusterExtension, rep *report) {
	for _, ev := range roleEvents {
		roles := rep.changed[ev.reason]
		if len(roles) == 0 {
			continue
		}
		slices.Sort(roles)
		list := strings.Join(roles[:min(len(roles), maxNamesInEvent)], ", ")
		if len(roles) > maxNamesInEvent {
			list += fmt.Sprintf(" and %d more", len(roles)-maxNamesInEvent)
		}
		r.Recorder.Eventf(ce, nil, corev1.EventTypeNormal, ev.reason, ev.action, ev.note, len(roles), list)
	}
}

// reconcileDelete removes every role oria generated for the extension named
// name. The roles' owner references would let the garbage collector do it
// too, but only once it notices; access to an uninstalled extension's APIs
// goes now.
func (r *Reconciler) reconcileDelete(ctx context.Context, name string) error {
	return r.deleteStale(ctx, nil, name, nil)
}

// conditionFor builds the RBACManaged condition of a reconcile that ran
// without errors.
func conditionFor(mode oriav1alpha1.RBACMode, annotated bool, apis int, rep *report) metav1.Condition {
	if mode == oriav1alpha1.RBACModeUnmanaged {
		msg := fmt.Sprintf("RBAC for this extension's APIs is not managed by oria; grant access manually or set the annotation %s to Legacy or FineGrained",
			oriav1alpha1.AnnotationRBACMode)
		if !annotated {
			msg += " (the annotation is not set, and oria's default mode is Unmanaged)"
		}
		return metav1.Condition{Status: metav1.ConditionFalse, Reason: oriav1alpha1.ReasonUnmanaged, Message: msg}
	}
	slices.Sort(rep.conflicts)
	slices.Sort(rep.bundle)
	var b strings.Builder
	if len(rep.conflicts) > 0 {
		fmt.Fprintf(&b, "%s. These roles are left alone; delete or rename them and oria generates its own. The extension's other ClusterRoles are in place (mode %s)",
			strings.Join(rep.conflicts, "; "), mode)
	} else {
		switch {
		case apis == 0:
			b.WriteString("The extension provides no APIs yet (no CustomResourceDefinitions labelled for it); nothing to generate")
		case mode == oriav1alpha1.RBACModeLegacy:
			fmt.Fprintf(&b, "ClusterRoles for %d API(s) are in place and aggregated to the built-in admin, edit and view ClusterRoles", apis)
		default:
			fmt.Fprintf(&b, "ClusterRoles for %d API(s) are in place, without aggregation; grant them with RBACPolicy objects", apis)
		}
	}
	if len(rep.bundle) > 0 {
		fmt.Fprintf(&b, ". Provided by the bundle (used instead of generated roles): %s", strings.Join(rep.bundle, ", "))
	}
	if len(rep.conflicts) > 0 {
		return metav1.Condition{Status: metav1.ConditionFalse, Reason: oriav1alpha1.ReasonConflict, Message: b.String()}
	}
	reason := oriav1alpha1.ReasonLegacy
	if mode == oriav1alpha1.RBACModeFineGrained {
		reason = oriav1alpha1.ReasonFineGrained
	}
	return metav1.Condition{Status: metav1.ConditionTrue, Reason: reason, Message: b.String()}
}

// ownerOf describes the extension a cached oria role belongs to.
func ownerOf(cr *rbacv1.ClusterRole) string {
	if ref := metav1.GetControllerOfNoCopy(cr); ref != nil {
		return fmt.Sprintf("%s %q", ref.Kind, ref.Name)
	}
	return fmt.Sprintf("label %s=%q", oriav1alpha1.LabelExtension, cr.Labels[oriav1alpha1.LabelExtension])
}

// roleRef returns a ClusterRole with only a name (and UID), to name a role
// in a write or an event.
func roleRef(name string, uid types.UID) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid},
	}
}

// forEach runs fn on every item with at most writeWorkers in parallel.
func forEach[T any](ctx context.Context, items []T, fn func(context.Context, T)) {
	sem := make(chan struct{}, writeWorkers)
	var wg sync.WaitGroup
	for _, it := range items {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(ctx, it)
		})
	}
	wg.Wait()
}

func modeList() string {
	s := make([]string, len(oriav1alpha1.RBACModes))
	for i, m := range oriav1alpha1.RBACModes {
		s[i] = string(m)
	}
	return strings.Join(s, ", ")
}

// shorten keeps a condition message readable when an error is long.
func shorten(s string) string {
	const maxLen = 1024
	if len(s) <= maxLen {
		return s
	}
	return s[:maxLen] + "..."
}
