package lookup

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Roles reads any ClusterRole from caches: oria's own from Managed (the
// main cache), every other one from Foreign (manager.NewForeignRoleCache).
// A role whose managed label is being added or removed may be in neither
// for a moment: it reads as absent, never as another role's.
type Roles struct {
	Managed, Foreign client.Reader
}

// Get returns the named ClusterRole (the cache's object: read-only), or nil
// when it does not exist.
func (r Roles) Get(ctx context.Context, name string) (*rbacv1.ClusterRole, error) {
	for _, c := range []client.Reader{r.Managed, r.Foreign} {
		role := &rbacv1.ClusterRole{}
		switch err := c.Get(ctx, types.NamespacedName{Name: name}, role, client.UnsafeDisableDeepCopy); {
		case err == nil:
			return role, nil
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading ClusterRole %q: %w", name, err)
		}
	}
	return nil, nil
}
