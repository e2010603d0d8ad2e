package rbacrules

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Cache is a Lister over every RBAC object of the cluster, held in two
// caches so that nothing is held twice: oria's own bindings and roles (those
// labelled Owned) are in the manager's cache already, which the controllers
// read; the rest are in a cache of Cache's own, which keeps of each object
// only what RBAC reads (name, namespace, subjects, role reference, rules).
//
// Cache runs on every replica, leader or not (the escalation guard serves
// on each): it starts the manager cache's informers of oria's RBAC objects
// too, which a replica that is not the leader would otherwise never start.
type Cache struct {
	// own is the manager's cache, holding the objects labelled owned.
	own cache.Cache
	// others holds every other RBAC object.
	others cache.Cache
	// synced is closed once every informer has listed its objects.
	synced chan struct{}
	// ctx is the context Start was given: the caches' readers need one.
	ctx context.Context
}

// Config is what NewCache needs.
type Config struct {
	// REST and Options (HTTPClient, Scheme, Mapper) connect the cache of
	// the objects oria does not own; NewCache sets its ByObject and
	// transforms.
	REST    *rest.Config
	Options cache.Options
	// Own is the manager's cache; OwnedKey=OwnedValue the label of the RBAC
	// objects it holds (oria's own).
	Own                  cache.Cache
	OwnedKey, OwnedValue string
}

// NewCache returns a Cache reading oria's own RBAC objects from cfg.Own and
// every other one from a cache of its own. Add it to the manager: it
// answers once Synced.
func NewCache(cfg Config) (*Cache, error) {
	notOwned, err := labels.NewRequirement(cfg.OwnedKey, selection.NotEquals, []string{cfg.OwnedValue})
	if err != nil {
		return nil, fmt.Errorf("selecting the RBAC objects oria does not own: %w", err)
	}
	others := cache.ByObject{Label: labels.NewSelector().Add(*notOwned), Transform: leanObject}
	opts := cfg.Options
	opts.DefaultTransform = nil
	opts.ByObject = map[client.Object]cache.ByObject{
		&rbacv1.ClusterRole{}:        others,
		&rbacv1.ClusterRoleBinding{}: others,
		&rbacv1.RoleBinding{}:        others,
		&rbacv1.Role{}:               {Transform: leanObject},
	}
	c, err := cache.New(cfg.REST, opts)
	if err != nil {
		return nil, fmt.Errorf("creating the cache of RBAC objects: %w", err)
	}
	return &Cache{own: cfg.Own, others: c, synced: make(chan struct{})}, nil
}

// Start starts the informers and blocks until ctx is done.
func (c *Cache) Start(ctx context.Context) error {
	c.ctx = ctx
	errs := make(chan error, 1)
	go func() { errs <- c.others.Start(ctx) }()
	var informers []toolscache.InformerSynced
	for _, obj := range []client.Object{&rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{}, &rbacv1.RoleBinding{}, &rbacv1.Role{}} {
		inf, err := c.others.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("starting the informer of every %T: %w", obj, err)
		}
		informers = append(informers, inf.HasSynced)
		if _, isRole := obj.(*rbacv1.Role); isRole {
			continue // oria writes no Roles
		}
		inf, err = c.own.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("starting the informer of oria's %T: %w", obj, err)
		}
		informers = append(informers, inf.HasSynced)
	}
	synced := make(chan bool, 1)
	go func() { synced <- toolscache.WaitForCacheSync(ctx.Done(), informers...) }()
	for {
		select {
		case err := <-errs:
			return err
		case ok := <-synced:
			if ok {
				close(c.synced)
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// NeedLeaderElection is false: the guard serves on every replica.
func (c *Cache) NeedLeaderElection() bool { return false }

// Synced reports whether every informer has listed its objects: until then
// the Lister would answer from a partial picture, and must not be asked.
func (c *Cache) Synced() bool {
	select {
	case <-c.synced:
		return true
	default:
		return false
	}
}

// WaitForSync waits until Synced, or ctx is done (its error).
func (c *Cache) WaitForSync(ctx context.Context) error {
	select {
	case <-c.synced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ClusterRoleBindings implements Lister.
func (c *Cache) ClusterRoleBindings() ([]*rbacv1.ClusterRoleBinding, error) {
	var a, b rbacv1.ClusterRoleBindingList
	if err := c.list(&a, &b); err != nil {
		return nil, err
	}
	return pointers(a.Items, b.Items), nil
}

// RoleBindings implements Lister.
func (c *Cache) RoleBindings(namespace string) ([]*rbacv1.RoleBinding, error) {
	var a, b rbacv1.RoleBindingList
	if err := c.list(&a, &b, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	return pointers(a.Items, b.Items), nil
}

// ClusterRole implements Lister.
func (c *Cache) ClusterRole(name string) (*rbacv1.ClusterRole, error) {
	r := &rbacv1.ClusterRole{}
	return get(c.ctx, r, client.ObjectKey{Name: name}, c.others, c.own)
}

// Role implements Lister.
func (c *Cache) Role(namespace, name string) (*rbacv1.Role, error) {
	r := &rbacv1.Role{}
	return get(c.ctx, r, client.ObjectKey{Namespace: namespace, Name: name}, c.others)
}

// list lists into a from the others cache and into b from the manager's,
// without copying: what is listed is only read.
func (c *Cache) list(a, b client.ObjectList, opts ...client.ListOption) error {
	opts = append(opts, client.UnsafeDisableDeepCopy)
	if err := c.others.List(c.ctx, a, opts...); err != nil {
		return err
	}
	return c.own.List(c.ctx, b, opts...)
}

// get reads key into obj from the first of readers that has it; (nil, nil)
// when none has.
func get[T client.Object](ctx context.Context, obj T, key client.ObjectKey, readers ...client.Reader) (T, error) {
	var zero T
	for _, r := range readers {
		err := r.Get(ctx, key, obj, client.UnsafeDisableDeepCopy)
		if err == nil {
			return obj, nil
		}
		if !apierrors.IsNotFound(err) {
			return zero, err
		}
	}
	return zero, nil
}

func pointers[T any](lists ...[]T) []*T {
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	out := make([]*T, 0, n)
	for _, l := range lists {
		for i := range l {
			out = append(out, &l[i])
		}
	}
	return out
}

// leanObject is the others cache's transform: it keeps of an RBAC object only
// what RBAC reads, dropping labels, annotations (kubectl's
// last-applied-configuration is often the largest part), owner references
// and managed fields.
func leanObject(obj any) (any, error) {
	switch o := obj.(type) {
	case *rbacv1.ClusterRole:
		return &rbacv1.ClusterRole{ObjectMeta: leanMeta(o.ObjectMeta), Rules: o.Rules}, nil
	case *rbacv1.Role:
		return &rbacv1.Role{ObjectMeta: leanMeta(o.ObjectMeta), Rules: o.Rules}, nil
	case *rbacv1.ClusterRoleBinding:
		return &rbacv1.ClusterRoleBinding{ObjectMeta: leanMeta(o.ObjectMeta), Subjects: o.Subjects, RoleRef: o.RoleRef}, nil
	case *rbacv1.RoleBinding:
		return &rbacv1.RoleBinding{ObjectMeta: leanMeta(o.ObjectMeta), Subjects: o.Subjects, RoleRef: o.RoleRef}, nil
	}
	return obj, nil
}

func leanMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion}
}
