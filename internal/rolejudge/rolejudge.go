// Package rolejudge decides which of the ClusterRoles a compiled grant
// names oria may bind for an extension (genroles.Classify on each): oria's
// role exactly as generated, or a bundle-provided role within the
// extension. It reads the roles; the RBACPolicy controller (a policy's
// grant) and the AccessRequest controller (an activation of an eligible
// policy) use the same judge, so that an activation never binds a role
// its policy would withhold.
package rolejudge

import (
	"context"
	"fmt"
	"slices"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/genroles"
	"github.com/operator-framework/oria/internal/olm"
)

// MaxRoleReads bounds the ClusterRoles one judgement reads from the API
// server by name: roles under generated names that are neither in oria's
// cache (oria-labelled) nor bundle-provided. Usually there are none (a role
// the extension controller is about to generate); beyond the bound, a role
// is withheld unread and read on a later reconcile.
const MaxRoleReads = 16

// Judge reads roles: Cache is oria's cache (its own, oria-labelled
// roles), APIReader the API server, BundleRoles the cache of
// bundle-provided roles (metadata only).
type Judge struct {
	Cache, APIReader, BundleRoles client.Reader
}

// Result is what may not be bound, and why.
type Result struct {
	// Withheld maps each role that may not be bound to why.
	Withheld map[string]string
	// Foreign (someone else's role under oria's name), TooBroad (a bundle
	// role beyond its extension) and Pending (missing, changed, unread)
	// hold the same sentences, sorted, by kind.
	Foreign, TooBroad, Pending []string
}

// Roles judges each of roles for extension ext, whose APIs are crds.
//
// oria's roles come from the cache. The rules of bundle-provided roles are
// read from the API server only when the bundle-role cache (metadata) says
// the bundle provides one of the names; any other name is read from the API
// server (it is not oria's, or it does not exist).
func (j Judge) Roles(ctx context.Context, ext *ocv1.ClusterExtension, crds, roles []string) (Result, error) {
	res := Result{Withheld: map[string]string{}}
	found := map[string]*rbacv1.ClusterRole{}
	var unknown []string
	for _, name := range roles {
		cr := &rbacv1.ClusterRole{}
		switch err := j.Cache.Get(ctx, client.ObjectKey{Name: name}, cr); {
		case err == nil:
			found[name] = cr
		case apierrors.IsNotFound(err):
			unknown = append(unknown, name)
		default:
			return Result{}, fmt.Errorf("reading ClusterRole %q from the cache: %w", name, err)
		}
	}
	bundle, err := j.bundleRoles(ctx, ext.Name, unknown)
	if err != nil {
		return Result{}, err
	}
	var unread []string
	reads := 0
	for _, name := range unknown {
		if cr, ok := bundle[name]; ok {
			found[name] = cr
			continue
		}
		if reads == MaxRoleReads {
			unread = append(unread, name)
			continue
		}
		reads++
		cr := &rbacv1.ClusterRole{}
		switch err := j.APIReader.Get(ctx, client.ObjectKey{Name: name}, cr); {
		case err == nil:
			found[name] = cr
		case !apierrors.IsNotFound(err):
			return Result{}, fmt.Errorf("reading ClusterRole %q: %w", name, err)
		}
	}
	gen := genroles.Of(crds)
	e := genroles.Extension{Name: ext.Name, UID: ext.UID, CRDs: crds}
	for _, name := range roles {
		if slices.Contains(unread, name) {
			res.Withheld[name] = fmt.Sprintf("ClusterRole %q is not one oria generated as far as its cache shows, and was not read yet (more than %d such roles)", name, MaxRoleReads)
			res.Pending = append(res.Pending, res.Withheld[name])
			continue
		}
		c := genroles.Classify(found[name], gen[name], e)
		if c.Bindable() {
			continue
		}
		res.Withheld[name] = c.Why
		switch c.Class {
		case genroles.Foreign:
			res.Foreign = append(res.Foreign, c.Why)
		case genroles.TooBroad:
			res.TooBroad = append(res.TooBroad, c.Why)
		default:
			res.Pending = append(res.Pending, c.Why)
		}
	}
	slices.Sort(res.Foreign)
	slices.Sort(res.TooBroad)
	slices.Sort(res.Pending)
	return res, nil
}

// bundleRoles returns, by name, the bundle-provided ClusterRoles of the
// named extension among names, with their rules. The rules are read from
// the API server only when the extension's bundle provides one of those
// names (the bundle-role cache, metadata only, says so); usually it
// provides none.
func (j Judge) bundleRoles(ctx context.Context, ext string, names []string) (map[string]*rbacv1.ClusterRole, error) {
	if len(names) == 0 {
		return nil, nil
	}
	owned := client.MatchingLabels(olm.OwnerLabels(ext))
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("ClusterRoleList"))
	if err := j.BundleRoles.List(ctx, list, owned); err != nil {
		return nil, fmt.Errorf("listing the bundle-provided ClusterRoles of ClusterExtension %q: %w", ext, err)
	}
	if !slices.ContainsFunc(list.Items, func(m metav1.PartialObjectMetadata) bool { return slices.Contains(names, m.Name) }) {
		return nil, nil
	}
	var full rbacv1.ClusterRoleList
	if err := j.APIReader.List(ctx, &full, owned); err != nil {
		return nil, fmt.Errorf("reading the bundle-provided ClusterRoles of ClusterExtension %q: %w", ext, err)
	}
	out := map[string]*rbacv1.ClusterRole{}
	for i := range full.Items {
		if slices.Contains(names, full.Items[i].Name) {
			out[full.Items[i].Name] = &full.Items[i]
		}
	}
	return out, nil
}
