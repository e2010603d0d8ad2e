package rbacrules

import (
	"errors"
	"fmt"
	"net/http"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// The escalation guard reads every RBAC object of the cluster into its cache of rules.
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings;clusterroles;clusterrolebindings,verbs=list;watch

// AddToManager returns the escalation guard's cache of RBAC rules (a
// Cache, read through authz.CachedRules), added to mgr: it runs
// on every replica, over every RBAC object oria does not own, and reads the
// ones oria does from mgr's cache. The replica reports ready (readyz) once
// it has synced.
func AddToManager(mgr ctrl.Manager) (*Cache, error) {
	rc, err := NewCache(Config{
		REST:    mgr.GetConfig(),
		Options: cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()},
		Own:     mgr.GetCache(), OwnedKey: oriav1alpha1.LabelManaged, OwnedValue: oriav1alpha1.ManagedValue,
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(rc); err != nil {
		return nil, fmt.Errorf("adding the cache of RBAC objects: %w", err)
	}
	if err := mgr.AddReadyzCheck("rbac-cache", func(*http.Request) error {
		if !rc.Synced() {
			return errors.New("the escalation guard's cache of RBAC objects has not synced yet")
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("adding the readiness check of the cache of RBAC objects: %w", err)
	}
	return rc, nil
}
