// Package watch maps the events of oria's watches to reconcile requests:
// the owner-reference handler of the watches on what oria creates
// (EnqueueController, which also tells the write engine what the cache now
// shows) and the predicate that filters ClusterExtension events
// (ExtensionChanged). The controllers use it in their SetupWithManager.
package watch

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/operator-framework/oria/internal/ownership"
)

// EnqueueController returns the handler of a watch on objects oria creates:
// it enqueues the object's controller when that is a (cluster-scoped) kind
// of group, as builder.Owns does, but from the ownerReference alone (Owns
// resolves the owner's kind through the REST mapper on every event, a
// large part of oria's allocations and CPU in a fan-out: docs/benchmarks.md,
// "Figures behind the code": owner watches). It first tells o (nil for none) of creates and
// deletes: the write engine's Memo then stops expecting an object it
// created, which the cache shows now or which is gone again
// (engine.Memo.Of).
func EnqueueController(group, kind string, o Observer) handler.EventHandler {
	enqueue := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], objs ...client.Object) {
		for _, obj := range objs {
			if name := ownership.ControllerOf(obj.GetOwnerReferences(), group, kind); name != "" {
				q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if o != nil {
				o.Seen(e.Object)
			}
			enqueue(q, e.Object)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if o != nil {
				o.Gone(e.Object)
			}
			enqueue(q, e.Object)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, e.Object)
		},
	}
}

// Observer is told what a watch saw of the objects oria creates: one
// created (the cache shows it now) or deleted.
type Observer interface {
	Seen(client.Object)
	Gone(client.Object)
}
