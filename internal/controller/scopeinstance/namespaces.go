package scopeinstance

import (
	"context"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/lookup"
)

// namespaceHandler maps namespace events to the instances they concern: the
// instances that list the namespace, those whose selector matches its old
// or its new labels (a relabelled namespace may start or stop matching),
// and those that publish into it. Updates that change neither the labels
// nor whether the namespace is terminating concern nobody.
type namespaceHandler struct {
	r *Reconciler
}

func (h *namespaceHandler) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	// A namespace of the initial list (oria starting, or, at a takeover,
	// this handler registered on an informer that had synced already and
	// replaying it) concerns no instance that the instance's own initial
	// add does not enqueue already: the ScopeInstance watch (For, whose
	// predicate passes every create) enqueues every cached instance, and
	// the controller's workers start only once all of its watches' caches
	// have synced, so each of those reconciles reads every such namespace
	// from the cache. Mapping each of thousands of namespaces to instances
	// here held the first pass after a restart for many seconds
	// (docs/benchmarks.md, "Figures behind the code": first pass). Nor does its binding-latency clock start: the
	// namespace is not new.
	if e.IsInInitialList {
		return
	}
	c := h.r.instancesForNamespace(ctx, e.Object.GetName(), e.Object.GetLabels(), nil)
	h.startClock(e.Object.GetName(), c.bind)
	enqueue(q, c)
}

func (h *namespaceHandler) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	oldNS, newNS := e.ObjectOld, e.ObjectNew
	relabelled := !maps.Equal(oldNS.GetLabels(), newNS.GetLabels())
	if !relabelled && terminating(oldNS) == terminating(newNS) {
		return
	}
	c := h.r.instancesForNamespace(ctx, newNS.GetName(), newNS.GetLabels(), oldNS.GetLabels())
	if !terminating(newNS) && relabelled {
		h.startClock(newNS.GetName(), c.bind)
	}
	enqueue(q, c)
}

func (h *namespaceHandler) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.r.latency.Forget(e.Object.GetName())
	enqueue(q, h.r.instancesForNamespace(ctx, e.Object.GetName(), e.Object.GetLabels(), nil))
}

func (h *namespaceHandler) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	enqueue(q, h.r.instancesForNamespace(ctx, e.Object.GetName(), e.Object.GetLabels(), nil))
}

func terminating(o metav1.Object) bool {
	return o.GetDeletionTimestamp() != nil
}

// startClock starts the binding-latency clock (internal/metrics) of a
// created or relabelled namespace for each instance that should bind it
// now; before the enqueue, so that the reconcile cannot finish first.
func (h *namespaceHandler) startClock(namespace string, instances []string) {
	for _, name := range instances {
		h.r.latency.Seen(name, namespace)
	}
}

func enqueue(q workqueue.TypedRateLimitingInterface[reconcile.Request], c concerned) {
	for _, names := range [][]string{c.bind, c.also} {
		for _, name := range names {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
		}
	}
}

// concerned are the instances a namespace event concerns: bind, those that
// should bind the namespace with its labels now (they list it, or their
// selector matches them); also, those whose selector matched only its old
// labels, and those that publish into it. A name may be in both.
type concerned struct {
	bind, also []string
}

// instancesForNamespace returns the instances concerned by an event of
// namespace, whose labels are nsLabels now and were oldLabels (nil: no
// change). Each question is one lookup by a cache index: an event reads
// the instances that list the namespace, have a selector, or publish into
// it, not every instance.
func (r *Reconciler) instancesForNamespace(ctx context.Context, namespace string, nsLabels, oldLabels map[string]string) concerned {
	var c concerned
	for _, si := range r.instancesBy(ctx, lookup.IndexNamespaces, namespace) {
		c.bind = append(c.bind, si.Name)
	}
	now, before := selecting(r.instancesBy(ctx, lookup.IndexNamespaceSelector, lookup.HasSelector), nsLabels, oldLabels)
	c.bind = append(c.bind, now...)
	c.also = before
	for _, si := range r.instancesBy(ctx, lookup.IndexPublicationNamespace, namespace) {
		c.also = append(c.also, si.Name)
	}
	return c
}

// instancesBy returns the cached instances whose index field holds value.
// They are the cache's own objects: read them, never change them. A failed
// lookup is logged and returns none.
func (r *Reconciler) instancesBy(ctx context.Context, field, value string) []oriav1alpha1.ScopeInstance {
	var list oriav1alpha1.ScopeInstanceList
	if err := r.Client.List(ctx, &list, client.MatchingFields{field: value}, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "looking up ScopeInstances", "index", field, "value", value)
		return nil
	}
	return list.Items
}

// selecting returns the names of the instances among items whose
// namespaceSelector matches nsLabels (now), and of those whose selector
// matches only oldLabels (before; nil oldLabels: none). An instance without
// a selector, or with an invalid one (reported on the instance as
// InvalidSelector), matches nothing.
func selecting(items []oriav1alpha1.ScopeInstance, nsLabels, oldLabels map[string]string) (now, before []string) {
	for i := range items {
		si := &items[i]
		if si.Spec.NamespaceSelector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(si.Spec.NamespaceSelector)
		if err != nil {
			continue
		}
		switch {
		case sel.Matches(labels.Set(nsLabels)):
			now = append(now, si.Name)
		case oldLabels != nil && sel.Matches(labels.Set(oldLabels)):
			before = append(before, si.Name)
		}
	}
	return now, before
}
