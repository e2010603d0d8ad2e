package manager

import (
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// ForeignRoleCacheOptions configures the cache of every ClusterRole that is
// not oria's (without oria's managed label; oria's own are in the main
// cache): the roles a gate copies (binding.GateRole) may be any role, and a
// copy must follow a narrowed role as soon as it changes. Only what a copy
// needs is kept: annotations (a last-applied configuration can be larger
// than the rules) and managedFields are dropped.
func ForeignRoleCacheOptions(c cache.Options) (cache.Options, error) {
	notOria, err := labels.NewRequirement(oriav1alpha1.LabelManaged, selection.NotEquals, []string{oriav1alpha1.ManagedValue})
	if err != nil {
		return c, fmt.Errorf("selecting the ClusterRoles that are not oria's: %w", err)
	}
	c.ByObject = map[client.Object]cache.ByObject{
		&rbacv1.ClusterRole{}: {Label: labels.NewSelector().Add(*notOria), Transform: func(o any) (any, error) {
			if role, ok := o.(*rbacv1.ClusterRole); ok {
				role.ManagedFields, role.Annotations = nil, nil
			}
			return o, nil
		}},
	}
	c.DefaultTransform = nil
	return c, nil
}

// NewForeignRoleCache returns the cache of the ClusterRoles that are not
// oria's (ForeignRoleCacheOptions), added to mgr.
func NewForeignRoleCache(mgr ctrl.Manager) (cache.Cache, error) {
	watchClient, err := WatchHTTPClient(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	opts, err := ForeignRoleCacheOptions(cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: watchClient})
	if err != nil {
		return nil, err
	}
	c, err := cache.New(mgr.GetConfig(), opts)
	if err != nil {
		return nil, fmt.Errorf("creating the cache of ClusterRoles that are not oria's: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, fmt.Errorf("adding the cache of ClusterRoles that are not oria's: %w", err)
	}
	return c, nil
}
