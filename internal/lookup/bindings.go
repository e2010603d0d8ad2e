package lookup

import (
	"context"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/ownership"
)

// IndexInstanceBindings indexes the cached RoleBindings and
// ClusterRoleBindings by the value of their scope-instance label.
//
// It is an index of the informers themselves, not a field index of the
// client: controller-runtime's field indexes also key every namespaced
// object by namespace and value, one one-element set per binding that oria
// never asks for (docs/benchmarks.md, History, bf2b38b). Here
// an instance is one key, whatever the number of namespaces, and a lookup
// returns the cached objects without building a list.
const IndexInstanceBindings = "oria.operatorframework.io/scope-instance"

// InstanceBindings looks up the cached bindings of a ScopeInstance.
type InstanceBindings struct {
	rbs, crbs toolscache.Indexer
}

// NewInstanceBindings registers IndexInstanceBindings on c's RoleBinding
// and ClusterRoleBinding informers, once per cache (the informers record
// it: a second call, from another controller of the same manager, looks up
// through the index already there).
func NewInstanceBindings(ctx context.Context, c cache.Informers) (*InstanceBindings, error) {
	rbs, err := instanceIndexer(ctx, c, &rbacv1.RoleBinding{})
	if err != nil {
		return nil, err
	}
	crbs, err := instanceIndexer(ctx, c, &rbacv1.ClusterRoleBinding{})
	if err != nil {
		return nil, err
	}
	return &InstanceBindings{rbs: rbs, crbs: crbs}, nil
}

func instanceIndexer(ctx context.Context, c cache.Informers, obj client.Object) (toolscache.Indexer, error) {
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return nil, fmt.Errorf("getting the %T informer: %w", obj, err)
	}
	indexed, ok := inf.(interface{ GetIndexer() toolscache.Indexer })
	if !ok {
		return nil, fmt.Errorf("the %T informer (%T) has no indexer", obj, inf)
	}
	if _, ok := indexed.GetIndexer().GetIndexers()[IndexInstanceBindings]; ok {
		return indexed.GetIndexer(), nil
	}
	if err := inf.AddIndexers(toolscache.Indexers{IndexInstanceBindings: byInstanceLabel}); err != nil {
		return nil, fmt.Errorf("indexing %T by %s: %w", obj, IndexInstanceBindings, err)
	}
	return indexed.GetIndexer(), nil
}

func byInstanceLabel(obj any) ([]string, error) {
	o, ok := obj.(client.Object)
	if !ok {
		return nil, nil
	}
	if v, ok := o.GetLabels()[oriav1alpha1.LabelScopeInstance]; ok {
		return []string{v}, nil
	}
	return nil, nil
}

// List returns the cached bindings labelled with the scope-instance label
// value (names.LabelValue of the instance's name). The objects are the
// cache's own: read them, never change them (copy first).
func (b *InstanceBindings) List(value string) (binding.Set, error) {
	rbs, err := byIndex[*rbacv1.RoleBinding](b.rbs, value)
	if err != nil {
		return binding.Set{}, err
	}
	crbs, err := byIndex[*rbacv1.ClusterRoleBinding](b.crbs, value)
	if err != nil {
		return binding.Set{}, err
	}
	return binding.Set{RoleBindings: rbs, ClusterRoleBindings: crbs}, nil
}

// Of returns the cached bindings of the named ScopeInstance: labelled for
// it and not controlled by another instance (label values of long names
// are hashed, so two instances may share one). The cache's own objects,
// as List.
func (b *InstanceBindings) Of(instance string) (binding.Set, error) {
	set, err := b.List(names.LabelValue(instance))
	if err != nil {
		return binding.Set{}, fmt.Errorf("listing the bindings of ScopeInstance %q: %w", instance, err)
	}
	another := func(o client.Object) bool {
		return !ownership.NotControlledByOther(o, ownership.KindScopeInstance, instance)
	}
	set.RoleBindings = slices.DeleteFunc(set.RoleBindings, func(b *rbacv1.RoleBinding) bool { return another(b) })
	set.ClusterRoleBindings = slices.DeleteFunc(set.ClusterRoleBindings, func(b *rbacv1.ClusterRoleBinding) bool { return another(b) })
	return set, nil
}

func byIndex[T client.Object](ix toolscache.Indexer, value string) ([]T, error) {
	objs, err := ix.ByIndex(IndexInstanceBindings, value)
	if err != nil {
		return nil, fmt.Errorf("looking up %s=%s: %w", IndexInstanceBindings, value, err)
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out, nil
}
