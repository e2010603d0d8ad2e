package extension

import (
	"context"
	"fmt"
	"maps"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/bundlerole"
	"github.com/operator-framework/oria/internal/olm"
)

// judgeBundleRoles decides, in Legacy and FineGrained mode, which of the
// plan's bundle-provided roles reach beyond the extension's APIs
// (bundlerole.TooBroad): those are granted nowhere, and reported.
//
// The bundle-role cache holds metadata only, so the rules are read from the
// API server: one list of the extension's bundle ClusterRoles, made only
// when the bundle provides a role under a generated name (most provide
// none). A role the cache still shows but the API server no longer has (or
// no longer labels as the extension's) is dropped from the plan: oria
// applies no label to it, which would create a stub under its name.
func (r *Reconciler) judgeBundleRoles(ctx context.Context, p *plan) error {
	if !managedMode(p.mode) || len(p.bundle) == 0 {
		return nil
	}
	list := &rbacv1.ClusterRoleList{}
	if err := r.APIReader.List(ctx, list, client.MatchingLabels(olm.OwnerLabels(p.ext.Name))); err != nil {
		return fmt.Errorf("reading the rules of the bundle-provided ClusterRoles of ClusterExtension %q: %w", p.ext.Name, err)
	}
	live := map[string]bool{}
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp.IsZero() {
			live[list.Items[i].Name] = true
		}
	}
	tooBroad := bundlerole.TooBroad(p.ext.Name, p.crds, list.Items)
	p.tooBroad = nil
	for _, name := range slices.Sorted(maps.Keys(p.bundle)) {
		if !live[name] {
			delete(p.bundle, name)
			continue
		}
		if why := tooBroad[name]; why != "" {
			b := p.bundle[name]
			b.TooBroad = why
			p.bundle[name] = b
			p.tooBroad = append(p.tooBroad, why)
		}
	}
	return nil
}
