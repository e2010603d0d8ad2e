package orphans

import (
	"context"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/lookup"
	"github.com/operator-framework/oria/internal/names"
)

type queue = workqueue.TypedRateLimitingInterface[Request]

// handle returns the event handler of the watch on objects of the judged
// kind (none: "" for an owner kind that is never judged): an object created
// or changed (the watch's first list too, at start and at takeover) is
// queued only when the cache's owners make it a suspect; an object deleted
// queues its dependents (dependents, nil for none): an owner's without a
// controller reference, which no event of their own brings once the owner
// is gone, and a binding's orphaned gate, which waits for it (gates.go).
func handle[T client.Object](r *Reconciler, kind string, dependents func(context.Context, T) []Request) handler.TypedEventHandler[T, Request] {
	judge := func(obj T, q queue) {
		if kind != "" && r.suspect(kind, obj) {
			q.Add(Request{Kind: kind, NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}})
		}
	}
	return handler.TypedFuncs[T, Request]{
		CreateFunc:  func(_ context.Context, e event.TypedCreateEvent[T], q queue) { judge(e.Object, q) },
		UpdateFunc:  func(_ context.Context, e event.TypedUpdateEvent[T], q queue) { judge(e.ObjectNew, q) },
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[T], q queue) { judge(e.Object, q) },
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[T], q queue) {
			if dependents == nil {
				return
			}
			for _, req := range dependents(ctx, e.Object) {
				q.Add(req)
			}
		},
	}
}

// byName adapts a dependents function of an owner's name to handle.
func byName[T client.Object](of func(context.Context, string) []Request) func(context.Context, T) []Request {
	return func(ctx context.Context, obj T) []Request { return of(ctx, obj.GetName()) }
}

// dependents finds, in the cache, the objects labelled for an owner that
// have no controller reference: the garbage collector removed it when the
// owner was deleted with orphaning. (Those with one are their owner
// controller's to clean up, and the garbage collector's.)
type dependents struct {
	client   client.Reader
	bindings *lookup.InstanceBindings
}

// ofInstance: the bindings and the gate (a ClusterRole labelled with the
// instance: binding.GateRole) of a deleted ScopeInstance. The gate is
// deleted only after the bindings (gates.go).
func (d dependents) ofInstance(ctx context.Context, name string) []Request {
	value := names.LabelValue(name)
	set, err := d.bindings.List(value)
	if err != nil {
		logf.FromContext(ctx).Error(err, "listing the bindings of a deleted ScopeInstance", "scopeInstance", name)
		return nil
	}
	var out []Request
	for _, rb := range set.RoleBindings {
		out = appendUncontrolled(out, KindRoleBinding, rb)
	}
	for _, crb := range set.ClusterRoleBindings {
		out = appendUncontrolled(out, KindClusterRoleBinding, crb)
	}
	var gates rbacv1.ClusterRoleList
	if err := d.client.List(ctx, &gates, client.MatchingLabels{oriav1alpha1.LabelScopeInstance: value}, client.UnsafeDisableDeepCopy); err != nil {
		logf.FromContext(ctx).Error(err, "listing the gates of a deleted ScopeInstance", "scopeInstance", name)
		return out
	}
	for i := range gates.Items {
		out = appendUncontrolled(out, KindClusterRole, &gates.Items[i])
	}
	return out
}

// ofTemplate: the inline ClusterRoles of a deleted ScopeTemplate.
func (d dependents) ofTemplate(ctx context.Context, name string) []Request {
	var roles rbacv1.ClusterRoleList
	if err := d.client.List(ctx, &roles, client.MatchingLabels{oriav1alpha1.LabelScopeTemplate: names.LabelValue(name)}, client.UnsafeDisableDeepCopy); err != nil {
		logf.FromContext(ctx).Error(err, "listing the ClusterRoles of a deleted ScopeTemplate", "scopeTemplate", name)
		return nil
	}
	var out []Request
	for i := range roles.Items {
		out = appendUncontrolled(out, KindClusterRole, &roles.Items[i])
	}
	return out
}

// ofPolicy: the ScopeTemplates and ScopeInstances compiled from a deleted
// RBACPolicy.
func (d dependents) ofPolicy(ctx context.Context, name string) []Request {
	sel := []client.ListOption{client.MatchingLabels{oriav1alpha1.LabelRBACPolicy: names.LabelValue(name)}, client.UnsafeDisableDeepCopy}
	var templates oriav1alpha1.ScopeTemplateList
	var instances oriav1alpha1.ScopeInstanceList
	for _, list := range []client.ObjectList{&templates, &instances} {
		if err := d.client.List(ctx, list, sel...); err != nil {
			logf.FromContext(ctx).Error(err, "listing the objects compiled from a deleted RBACPolicy", "rbacPolicy", name)
			return nil
		}
	}
	var out []Request
	for i := range templates.Items {
		out = appendUncontrolled(out, KindScopeTemplate, &templates.Items[i])
	}
	for i := range instances.Items {
		out = appendUncontrolled(out, KindScopeInstance, &instances.Items[i])
	}
	return out
}

func appendUncontrolled(out []Request, kind string, obj metav1.Object) []Request {
	if metav1.GetControllerOf(obj) != nil {
		return out
	}
	return append(out, Request{Kind: kind, NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}})
}
