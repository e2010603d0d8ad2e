package rbacpolicy

import (
	"context"
	"fmt"
	"slices"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/genroles"
	"github.com/operator-framework/oria/internal/olm"
)

// maxRoleReads bounds the ClusterRoles one reconcile reads from the API
// server by name: roles under generated names that are neither in oria's
// cache (oria-labelled) nor bundle-provided. Usually there are none (a role
// the extension controller is about to generate); beyond the bound, a role
// is withheld unread and read on a later reconcile.
const maxRoleReads = 16

// judgeRoles decides, for every ClusterRole the compiled policy binds,
// whether oria may bind it (genroles.Judge): oria's role exactly as
// generated, or a bundle-provided role within the extension. Every other one
// is withheld from p.compiled (policy.Compiled.Withhold) and recorded in p
// with why: a role that is missing, a role oria made that someone changed,
// a too-broad bundle role, a role made by someone else.
//
// oria's roles come from the cache. The rules of bundle-provided roles are
// read from the API server only when the bundle-role cache (metadata) says
// the bundle provides one of the names; any other name is read from the API
// server (it is not oria's, or it does not exist).
func (r *Reconciler) judgeRoles(ctx context.Context, ext *ocv1.ClusterExtension, crds []string, p *plan) error {
	if p.compiled.Template == nil {
		return nil
	}
	found := map[string]*rbacv1.ClusterRole{}
	var unknown []string
	for _, name := range p.compiled.Roles {
		cr := &rbacv1.ClusterRole{}
		switch err := r.Client.Get(ctx, client.ObjectKey{Name: name}, cr); {
		case err == nil:
			found[name] = cr
		case apierrors.IsNotFound(err):
			unknown = append(unknown, name)
		default:
			return fmt.Errorf("reading ClusterRole %q from the cache: %w", name, err)
		}
	}
	bundle, err := r.bundleRoles(ctx, ext.Name, unknown)
	if err != nil {
		return err
	}
	var unread []string
	reads := 0
	for _, name := range unknown {
		if cr, ok := bundle[name]; ok {
			found[name] = cr
			continue
		}
		if reads == maxRoleReads {
			unread = append(unread, name)
			continue
		}
		reads++
		cr := &rbacv1.ClusterRole{}
		switch err := r.APIReader.Get(ctx, client.ObjectKey{Name: name}, cr); {
		case err == nil:
			found[name] = cr
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("reading ClusterRole %q: %w", name, err)
		}
	}
	gen := genroles.Of(crds)
	e := genroles.Extension{Name: ext.Name, UID: ext.UID, CRDs: crds}
	withheld := map[string]string{}
	for _, name := range p.compiled.Roles {
		if slices.Contains(unread, name) {
			withheld[name] = fmt.Sprintf("ClusterRole %q is not one oria generated as far as its cache shows, and was not read yet (more than %d such roles)", name, maxRoleReads)
			p.pending = append(p.pending, withheld[name])
			continue
		}
		j := genroles.Judge(found[name], gen[name], e)
		if j.Bindable() {
			continue
		}
		withheld[name] = j.Why
		switch j.Verdict {
		case genroles.Foreign:
			p.foreign = append(p.foreign, j.Why)
		case genroles.TooBroad:
			p.tooBroad = append(p.tooBroad, j.Why)
		default:
			p.pending = append(p.pending, j.Why)
		}
	}
	p.compiled.Withhold(withheld)
	slices.Sort(p.foreign)
	slices.Sort(p.tooBroad)
	slices.Sort(p.pending)
	return nil
}

// bundleRoles returns, by name, the bundle-provided ClusterRoles of the
// named extension among names, with their rules. The rules are read from
// the API server only when the extension's bundle provides one of those
// names (the bundle-role cache, metadata only, says so); usually it
// provides none.
func (r *Reconciler) bundleRoles(ctx context.Context, ext string, names []string) (map[string]*rbacv1.ClusterRole, error) {
	if len(names) == 0 {
		return nil, nil
	}
	owned := client.MatchingLabels(olm.OwnerLabels(ext))
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("ClusterRoleList"))
	if err := r.BundleRoles.List(ctx, list, owned); err != nil {
		return nil, fmt.Errorf("listing the bundle-provided ClusterRoles of ClusterExtension %q: %w", ext, err)
	}
	if !slices.ContainsFunc(list.Items, func(m metav1.PartialObjectMetadata) bool { return slices.Contains(names, m.Name) }) {
		return nil, nil
	}
	var full rbacv1.ClusterRoleList
	if err := r.APIReader.List(ctx, &full, owned); err != nil {
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

// withheld are the sentences of every withheld role: conflicts first.
func (p *plan) withheld() []string {
	return slices.Concat(p.foreign, p.tooBroad, p.pending)
}

// withheldReason is the Ready reason of a policy whose roles are all
// withheld: Conflict when a role is someone else's (the admin must act),
// BundleRoleTooBroad when the bundle must change, else Progressing (oria
// generates or restores its roles itself).
func (p *plan) withheldReason() string {
	switch {
	case len(p.foreign) > 0:
		return oriav1alpha1.ReasonConflict
	case len(p.tooBroad) > 0:
		return oriav1alpha1.ReasonBundleRoleTooBroad
	}
	return oriav1alpha1.ReasonProgressing
}
