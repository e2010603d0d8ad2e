package scopetemplate

import (
	"context"
	"slices"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/ownership"
)

// A ceiling holds for the life of a binding: the bindings of a ScopeInstance
// with a serviceAccount were written as that ServiceAccount, which allowed
// for the rules their role had then, and each records their hash
// (AnnotationCeilingRules). New rules for an inline role are therefore held
// back, the role keeping its previous rules, while a binding of it by such
// an instance records other rules: the ScopeInstance controller asks the
// ServiceAccount about the new rules and either records them on the binding
// or deletes it. Once every such binding records the new rules or is gone,
// the role is written. Meanwhile the template reports Progressing and looks
// again every CeilingWaitInterval (and on every change of such a binding).

// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings;clusterrolebindings,verbs=get;list;watch

// CeilingWaitInterval is how often a template whose new inline rules wait
// for a ServiceAccount ceiling looks again.
const CeilingWaitInterval = 2 * time.Second

// changing returns the inline roles of desired whose write would change
// what they grant (they do not exist yet, or their rules differ from
// cached), each with the ceiling value of its new rules.
func changing(desired []*rbacv1.ClusterRole, cached map[types.NamespacedName]*rbacv1.ClusterRole) map[string]string {
	out := map[string]string{}
	for _, want := range desired {
		cur, ok := cached[types.NamespacedName{Name: want.Name}]
		if ok && equality.Semantic.DeepEqual(cur.Rules, want.Rules) {
			continue
		}
		out[want.Name] = binding.CeilingHash(want.Rules)
	}
	return out
}

// ceilingBinding is what the hold needs of a binding: its role and the
// ceiling it records.
type ceilingBinding struct {
	Role, Ceiling string
}

// unconfirmed returns, for each role of roles (role → ceiling value of its
// new rules), the instances (sorted) with a binding of it that records
// another ceiling; bindings are those of each instance with a
// serviceAccount.
func unconfirmed(roles map[string]string, bindings map[string][]ceilingBinding) map[string][]string {
	out := map[string][]string{}
	for instance, bs := range bindings {
		for _, b := range bs {
			if want, ok := roles[b.Role]; ok && b.Ceiling != want && !slices.Contains(out[b.Role], instance) {
				out[b.Role] = append(out[b.Role], instance)
			}
		}
	}
	for _, instances := range out {
		slices.Sort(instances)
	}
	return out
}

// held returns the inline roles of p whose new rules wait for a ceiling,
// with the instances they wait for; withCeiling are the template's
// instances with a serviceAccount.
func (r *Reconciler) held(p *plan, withCeiling []string) (map[string][]string, error) {
	if len(withCeiling) == 0 {
		return nil, nil
	}
	roles := changing(p.desired, p.cached)
	if len(roles) == 0 {
		return nil, nil
	}
	bindings := map[string][]ceilingBinding{}
	for _, instance := range withCeiling {
		rbs, crbs, err := r.instanceBindings(instance)
		if err != nil {
			return nil, err
		}
		for _, b := range rbs {
			bindings[instance] = append(bindings[instance], ceilingBinding{binding.RoleOfRoleBinding(b), binding.Ceiling(b)})
		}
		for _, b := range crbs {
			bindings[instance] = append(bindings[instance], ceilingBinding{binding.RoleOfClusterRoleBinding(b), binding.Ceiling(b)})
		}
	}
	if held := unconfirmed(roles, bindings); len(held) > 0 {
		return held, nil
	}
	return nil, nil
}

// instanceBindings returns the cached bindings of instance
// (lookup.InstanceBindings.Of).
func (r *Reconciler) instanceBindings(instance string) ([]*rbacv1.RoleBinding, []*rbacv1.ClusterRoleBinding, error) {
	set, err := r.Bindings.Of(instance)
	return set.RoleBindings, set.ClusterRoleBindings, err
}

// hasCeiling passes bindings that record a ceiling (on either side of an
// update): the bindings a held role waits for.
func hasCeiling() predicate.Predicate {
	has := func(o client.Object) bool { return o != nil && binding.Ceiling(o) != "" }
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return has(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return has(e.ObjectOld) || has(e.ObjectNew) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return has(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return has(e.Object) },
	}
}

// templateOfBinding maps a binding to the template of the instance that
// controls it.
func (r *Reconciler) templateOfBinding() handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		name := ownership.ControllerName(o.GetOwnerReferences(), ownership.KindScopeInstance)
		if name == "" {
			return nil
		}
		si := &oriav1alpha1.ScopeInstance{}
		if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, si); err != nil || si.Spec.ScopeTemplateName == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: si.Spec.ScopeTemplateName}}}
	})
}
