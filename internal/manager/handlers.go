package manager

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/operator-framework/oria/internal/ownership"
)

// EnqueueController returns the handler of a watch on objects oria creates:
// it tells seen (the write engine's Memo, which stops expecting an object
// the cache has shown; nil for none) of every event, and enqueues the
// object's controller when that is a (cluster-scoped) kind of group, as
// builder.Owns does, but from the ownerReference alone. Owns resolves the
// owner's kind through the REST mapper on every event, which in the
// 50,000-binding benchmark allocated 320 MB (11 % of everything oria
// allocated) and its CPU.
func EnqueueController(group, kind string, seen func(client.Object)) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if seen != nil {
			seen(o)
		}
		name := ownership.ControllerOf(o.GetOwnerReferences(), group, kind)
		if name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
	})
}
