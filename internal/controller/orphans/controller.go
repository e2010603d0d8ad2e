// Package orphans is the sweep: every binding oria made has a living owner.
// A RoleBinding, ClusterRoleBinding or ClusterRole oria created, or a
// ScopeTemplate or ScopeInstance it compiled from an RBACPolicy, whose
// owner is gone, or exists with another UID than its controller reference
// records, is deleted: at start and at takeover (the controller is
// leader-elected, and its watches replay every cached object when it
// starts), and when seen (an object's event, or its owner's deletion).
//
// The owner an object claims is its controller reference (name and UID) or,
// when the garbage collector removed that (an owner deleted with
// --cascade=orphan), its owner label, compared with the label values
// (names.LabelValue) of the owners that exist (ClaimOf, Decide: pure,
// table-tested). Objects with a living owner cost their event a map lookup
// in the cache's store of owners and no reconcile; a suspect is read again
// from the API server with its owner before it is deleted, through the
// write engine with a UID precondition, so that an owner created a moment
// ago is never taken for a missing one. An unchanged world costs nothing.
//
// ClusterRoles an extension controls are left to the extension controller
// (see ClaimOf). The gate of a time-bound grant whose ScopeInstance is gone
// is emptied at once and deleted only after its bindings (gates.go).
package orphans

import (
	"cmp"
	"context"
	"errors"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/source"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/lookup"
	"github.com/operator-framework/oria/internal/metrics"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "orphans"

// DefaultMaxConcurrentReconciles is how many suspects are judged at once:
// an unchanged world has none, and an orphan costs two reads and a delete.
const DefaultMaxConcurrentReconciles = 4

// Options configure the controller.
type Options struct {
	// MaxConcurrentReconciles is the number of workers
	// (DefaultMaxConcurrentReconciles when 0).
	MaxConcurrentReconciles int
}

// Deps are what the sweep is built from, each required (New refuses a
// missing one): controller.SetupAll builds them once per manager.
type Deps struct {
	// Client reads from the cache and deletes.
	Client client.Client
	// APIReader reads from the API server: a suspect and its owner are read
	// again there before anything is deleted.
	APIReader client.Reader
	// Engine is the write engine's state this controller shares with the
	// others of its manager.
	Engine *engine.Engine
	// Owners is the cache's view of the owners (NewCachedOwners).
	Owners Owners
	// Bindings looks up an instance's cached bindings by index: the
	// dependents of a deleted instance.
	Bindings *lookup.InstanceBindings
}

// Request names one object to judge: its kind (Kind* constants) and key.
type Request struct {
	Kind string
	types.NamespacedName
}

// Reconciler deletes the orphans among oria's objects. Make one with New.
type Reconciler struct {
	Deps
	// memo is the engine's memory of the sweep's own writes (an orphaned
	// gate emptied before it is deleted: gates.go).
	memo *engine.Memo
}

// New returns the Reconciler of d, or an error naming a missing
// dependency.
func New(d Deps) (*Reconciler, error) {
	if d.Client == nil || d.APIReader == nil || d.Engine == nil || d.Owners == nil || d.Bindings == nil {
		return nil, errors.New("the orphan sweep needs a client, an API reader, the write engine, the owners and the binding index")
	}
	return &Reconciler{Deps: d, memo: engine.NewMemo()}, nil
}

// judged describes one judged kind: an empty object to read into, and its
// deletion through the engine.
type judged struct {
	new func() client.Object
	del func(ctx context.Context, w *engine.Writer, obj client.Object) []engine.Outcome
}

func judgedKind[T client.Object](kind string, newT func() T) judged {
	return judged{
		new: func() client.Object { return newT() },
		del: func(ctx context.Context, w *engine.Writer, obj client.Object) []engine.Outcome {
			return engine.Delete(ctx, w, kind, []T{obj.(T)})
		},
	}
}

var judgedKinds = map[string]judged{
	KindRoleBinding:        judgedKind(KindRoleBinding, func() *rbacv1.RoleBinding { return &rbacv1.RoleBinding{} }),
	KindClusterRoleBinding: judgedKind(KindClusterRoleBinding, func() *rbacv1.ClusterRoleBinding { return &rbacv1.ClusterRoleBinding{} }),
	KindClusterRole:        judgedKind(KindClusterRole, func() *rbacv1.ClusterRole { return &rbacv1.ClusterRole{} }),
	KindScopeTemplate:      judgedKind(KindScopeTemplate, func() *oriav1alpha1.ScopeTemplate { return &oriav1alpha1.ScopeTemplate{} }),
	KindScopeInstance:      judgedKind(KindScopeInstance, func() *oriav1alpha1.ScopeInstance { return &oriav1alpha1.ScopeInstance{} }),
}

// SetupWithManager builds the sweep (New) and registers it with mgr.
func SetupWithManager(mgr ctrl.Manager, deps Deps, o Options) error {
	r, err := New(deps)
	if err != nil {
		return err
	}
	d := dependents{client: deps.Client, bindings: deps.Bindings}
	c := mgr.GetCache()
	return builder.TypedControllerManagedBy[Request](mgr).
		Named(ControllerName).
		WatchesRawSource(source.TypedKind(c, &rbacv1.RoleBinding{}, handle(r, KindRoleBinding, func(ctx context.Context, b *rbacv1.RoleBinding) []Request {
			return r.gateOfBinding(ctx, b.RoleRef)
		}))).
		WatchesRawSource(source.TypedKind(c, &rbacv1.ClusterRoleBinding{}, handle(r, KindClusterRoleBinding, func(ctx context.Context, b *rbacv1.ClusterRoleBinding) []Request {
			return r.gateOfBinding(ctx, b.RoleRef)
		}))).
		WatchesRawSource(source.TypedKind(c, &rbacv1.ClusterRole{}, handle[*rbacv1.ClusterRole](r, KindClusterRole, nil))).
		WatchesRawSource(source.TypedKind(c, &oriav1alpha1.ScopeTemplate{}, handle(r, KindScopeTemplate, byName[*oriav1alpha1.ScopeTemplate](d.ofTemplate)))).
		WatchesRawSource(source.TypedKind(c, &oriav1alpha1.ScopeInstance{}, handle(r, KindScopeInstance, byName[*oriav1alpha1.ScopeInstance](d.ofInstance)))).
		// RBACPolicies are owners only; watching them also makes the
		// controller wait for their store before it judges anything.
		WatchesRawSource(source.TypedKind(c, &oriav1alpha1.RBACPolicy{}, handle(r, "", byName[*oriav1alpha1.RBACPolicy](d.ofPolicy)))).
		WithOptions(controller.TypedOptions[Request]{MaxConcurrentReconciles: cmp.Or(o.MaxConcurrentReconciles, DefaultMaxConcurrentReconciles),
			EnableWarmup: ptr.To(true)}). // a standby's watches run before it leads (controller.SetupAll)
		Complete(r)
}

// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings;clusterrolebindings;clusterroles,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=update
// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=scopetemplates;scopeinstances,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=rbacpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=olm.operatorframework.io,resources=clusterextensions,verbs=get;list;watch

// Reconcile judges one suspect: on the cache first (its owner may have
// appeared since the event), then on what the API server says of it and
// its owner, and deletes it when it is an orphan.
func (r *Reconciler) Reconcile(ctx context.Context, req Request) (ctrl.Result, error) {
	k, ok := judgedKinds[req.Kind]
	if !ok {
		return ctrl.Result{}, nil
	}
	cached := k.new()
	if err := r.Client.Get(ctx, req.NamespacedName, cached); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if f := FateOf(req.Kind, cached, r.Owners); !f.Orphaned && !f.Unknown {
		return ctrl.Result{}, nil
	}
	if role, ok := cached.(*rbacv1.ClusterRole); ok && r.waitForBindings(role) {
		return ctrl.Result{}, nil // an empty gate waits for its bindings to go (gates.go)
	}
	live := k.new()
	if err := r.APIReader.Get(ctx, req.NamespacedName, live); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	claim, ok := ClaimOf(req.Kind, live)
	if !ok {
		return ctrl.Result{}, nil
	}
	owners, err := freshOwners(ctx, r.APIReader, claim)
	if err != nil {
		return ctrl.Result{}, err
	}
	fate := FateOf(req.Kind, live, owners)
	if !fate.Orphaned {
		return ctrl.Result{}, nil
	}
	if isGateClaim(req.Kind, claim) {
		// Emptied first, deleted after its bindings (gates.go).
		if deletable, err := r.settleGate(ctx, live.(*rbacv1.ClusterRole), claim); err != nil || !deletable {
			return ctrl.Result{}, err
		}
	}
	s := engine.Summarize(k.del(ctx, r.writer(), live))
	if len(s.Errors) > 0 {
		return ctrl.Result{}, errors.Join(s.Errors...)
	}
	// No Event: an Event belongs to an object, and the owner is gone.
	ctrl.LoggerFrom(ctx).Info("deleted an object oria created whose owner is gone",
		"kind", req.Kind, "namespace", req.Namespace, "name", req.Name, "uid", live.GetUID(), "owner", claim.String(), "reason", fate.Reason)
	metrics.OrphanDeleted(req.Kind, fate.Reason)
	return ctrl.Result{}, nil
}

// writer is the engine's writer of one deletion (engine.Delete,
// engine/write.go).
func (r *Reconciler) writer() *engine.Writer {
	return &engine.Writer{Client: r.Client, Revoker: r.Client, Reader: r.APIReader, Cache: r.Client, Memo: r.memo, Engine: r.Engine, Workers: 1}
}

// suspect reports whether obj (of the judged kind) may be an orphan, on
// the cache's view of its owner.
func (r *Reconciler) suspect(kind string, obj metav1.Object) bool {
	f := FateOf(kind, obj, r.Owners)
	return f.Orphaned || f.Unknown
}
