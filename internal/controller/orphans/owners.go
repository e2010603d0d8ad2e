package orphans

import (
	"context"
	"fmt"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/ownership"
)

// CachedOwners is the Owners view of a manager's cache: the informers'
// own stores of ScopeInstances, ScopeTemplates and RBACPolicies, read
// without a copy, so that judging an object whose owner is there costs a
// map lookup. ClusterExtensions are not in it (only extension roles without
// a controller reference are judged against them, and those are rare):
// Decide calls those Unknown, and the fresh read decides.
type CachedOwners struct {
	stores map[string]toolscache.Indexer
}

// NewCachedOwners gets the informers of the owner kinds from c (the
// manager's cache; at setup, before it starts).
func NewCachedOwners(ctx context.Context, c cache.Informers) (*CachedOwners, error) {
	o := &CachedOwners{stores: map[string]toolscache.Indexer{}}
	for kind, obj := range map[string]client.Object{
		ownership.KindScopeInstance: &oriav1alpha1.ScopeInstance{},
		ownership.KindScopeTemplate: &oriav1alpha1.ScopeTemplate{},
		ownership.KindRBACPolicy:    &oriav1alpha1.RBACPolicy{},
	} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return nil, fmt.Errorf("getting the %s informer: %w", kind, err)
		}
		indexed, ok := inf.(interface{ GetIndexer() toolscache.Indexer })
		if !ok {
			return nil, fmt.Errorf("the %s informer (%T) has no store", kind, inf)
		}
		o.stores[kind] = indexed.GetIndexer()
	}
	return o, nil
}

// Knows implements Owners.
func (o *CachedOwners) Knows(kind string) bool {
	_, ok := o.stores[kind]
	return ok
}

// UID implements Owners. A failed read counts as missing: the fresh read
// decides.
func (o *CachedOwners) UID(kind, name string) (types.UID, bool) {
	obj, exists, err := o.stores[kind].GetByKey(name)
	if err != nil || !exists {
		return "", false
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return "", false
	}
	return m.GetUID(), true
}

// Labelled implements Owners. It goes through every cached owner of kind:
// it is asked only about objects without a controller reference, which
// oria never makes.
func (o *CachedOwners) Labelled(kind, value string) bool {
	for _, obj := range o.stores[kind].List() {
		if m, ok := obj.(metav1.Object); ok && names.LabelValue(m.GetName()) == value {
			return true
		}
	}
	return false
}

// ownerGVK is the API type of each owner kind.
var ownerGVK = map[string]schema.GroupVersionKind{
	ownership.KindScopeInstance: oriav1alpha1.GroupVersion.WithKind(ownership.KindScopeInstance),
	ownership.KindScopeTemplate: oriav1alpha1.GroupVersion.WithKind(ownership.KindScopeTemplate),
	ownership.KindRBACPolicy:    oriav1alpha1.GroupVersion.WithKind(ownership.KindRBACPolicy),
	ocv1.ClusterExtensionKind:   ocv1.GroupVersion.WithKind(ocv1.ClusterExtensionKind),
}

// freshOwners reads from the API server (r, the manager's API reader) what
// exists of the owner c claims, as metadata: the owner of that name, or
// every owner of that kind for a claim by label. A kind the API server does
// not serve (the ClusterExtension CRD is not installed) is left out of the
// set: Decide then calls the claim Unknown and nothing is deleted.
func freshOwners(ctx context.Context, r client.Reader, c Claim) (OwnerSet, error) {
	gvk, ok := ownerGVK[c.Kind]
	if !ok {
		return nil, fmt.Errorf("unknown owner kind %q", c.Kind)
	}
	set := OwnerSet{c.Kind: {}}
	if c.Name != "" {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk)
		err := r.Get(ctx, client.ObjectKey{Name: c.Name}, m)
		switch {
		case err == nil:
			set[c.Kind][m.Name] = m.UID
		case meta.IsNoMatchError(err):
			return OwnerSet{}, nil
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading %s %q: %w", c.Kind, c.Name, err)
		}
		return set, nil
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := r.List(ctx, list); meta.IsNoMatchError(err) {
		return OwnerSet{}, nil
	} else if err != nil {
		return nil, fmt.Errorf("listing %ss: %w", c.Kind, err)
	}
	for _, m := range list.Items {
		set[c.Kind][m.Name] = m.UID
	}
	return set, nil
}
