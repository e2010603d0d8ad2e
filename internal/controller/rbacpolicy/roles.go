package rbacpolicy

import (
	"context"
	"slices"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/rolejudge"
)

// judgeRoles decides, for every ClusterRole the compiled policy binds,
// whether oria may bind it (rolejudge.Judge): every other one is withheld
// from p.compiled (policy.Compiled.Withhold) and recorded in p with why: a
// role that is missing, a role oria made that someone changed, a too-broad
// bundle role, a role made by someone else.
func (r *Reconciler) judgeRoles(ctx context.Context, ext *ocv1.ClusterExtension, crds []string, p *plan) error {
	if p.compiled.Template == nil {
		return nil
	}
	res, err := r.roleJudge().Roles(ctx, ext, crds, p.compiled.Roles)
	if err != nil {
		return err
	}
	p.compiled.Withhold(res.Withheld)
	p.foreign, p.tooBroad, p.pending = res.Foreign, res.TooBroad, res.Pending
	return nil
}

// roleJudge reads roles from the cache, the API server and the bundle-role
// cache.
func (r *Reconciler) roleJudge() rolejudge.Judge {
	return rolejudge.Judge{Cache: r.Client, APIReader: r.APIReader, BundleRoles: r.BundleRoles}
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
