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
// instances that list the namespace, and those whose selector matches its
// old or its new labels (a relabelled namespace may start or stop
// matching). Updates that change neither the labels nor whether the
// namespace is terminating concern nobody.
type namespaceHandler struct {
	r *Reconciler
}

func (h *namespaceHandler) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.startClock(ctx, e.Object.GetName(), e.Object.GetLabels())
	h.enqueue(ctx, q, e.Object.GetName(), e.Object.GetLabels())
}

func (h *namespaceHandler) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	oldNS, newNS := e.ObjectOld, e.ObjectNew
	if maps.Equal(oldNS.GetLabels(), newNS.GetLabels()) && terminating(oldNS) == terminating(newNS) {
		return
	}
	if !terminating(newNS) && !maps.Equal(oldNS.GetLabels(), newNS.GetLabels()) {
		h.startClock(ctx, newNS.GetName(), newNS.GetLabels())
	}
	h.enqueue(ctx, q, newNS.GetName(), oldNS.GetLabels(), newNS.GetLabels())
}

func (h *namespaceHandler) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.r.latency.Forget(e.Object.GetName())
	h.enqueue(ctx, q, e.Object.GetName(), e.Object.GetLabels())
}

func (h *namespaceHandler) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.enqueue(ctx, q, e.Object.GetName(), e.Object.GetLabels())
}

func terminating(o metav1.Object) bool {
	return o.GetDeletionTimestamp() != nil
}

// startClock starts the binding-latency clock (internal/metrics) of a
// created or relabelled namespace for each instance that should bind it
// now; before the enqueue, so that the reconcile cannot finish first.
func (h *namespaceHandler) startClock(ctx context.Context, namespace string, labels map[string]string) {
	for _, name := range h.r.instancesForNamespace(ctx, namespace, labels) {
		h.r.latency.Seen(name, namespace)
	}
}

func (h *namespaceHandler) enqueue(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], namespace string, labelSets ...map[string]string) {
	for _, name := range h.r.instancesForNamespace(ctx, namespace, labelSets...) {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	}
	for _, name := range h.r.instancesPublishingIn(ctx, namespace) {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	}
}

// instancesForNamespace returns the names of the instances that list
// namespace or whose selector matches any of labelSets.
func (r *Reconciler) instancesForNamespace(ctx context.Context, namespace string, labelSets ...map[string]string) []string {
	log := ctrl.LoggerFrom(ctx)
	var out []string
	var listing oriav1alpha1.ScopeInstanceList
	if err := r.Client.List(ctx, &listing, client.MatchingFields{lookup.IndexNamespaces: namespace}, client.UnsafeDisableDeepCopy); err != nil {
		log.Error(err, "listing the ScopeInstances that list a namespace", "namespace", namespace)
	}
	for _, si := range listing.Items {
		out = append(out, si.Name)
	}
	// Selectors cannot be indexed; the instances are few next to the
	// namespaces, and the cache list is read-only.
	var all oriav1alpha1.ScopeInstanceList
	if err := r.Client.List(ctx, &all, client.UnsafeDisableDeepCopy); err != nil {
		log.Error(err, "listing ScopeInstances")
		return out
	}
	for _, si := range all.Items {
		if si.Spec.NamespaceSelector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(si.Spec.NamespaceSelector)
		if err != nil {
			continue // reported on the instance as InvalidSelector
		}
		for _, l := range labelSets {
			if sel.Matches(labels.Set(l)) {
				out = append(out, si.Name)
				break
			}
		}
	}
	return out
}
