package accessrequest

import (
	"context"
	"fmt"
	"slices"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/eligibility"
	"github.com/operator-framework/oria/internal/lookup"
	policymodel "github.com/operator-framework/oria/internal/policy"
	"github.com/operator-framework/oria/internal/reconciler"
	"github.com/operator-framework/oria/internal/rolejudge"
)

// plan is what one reconcile of a request read and decided.
type plan struct {
	// assessment is what the request is now (eligibility.Assess).
	assessment eligibility.Assessment
	// compiled is the grant of an Active request (eligibility.Activation);
	// its Template is nil when there is nothing to bind (not Active, or
	// the extension provides none of the policy's APIs).
	compiled policymodel.Compiled
	// withheld says why roles of the policy are not bound by the
	// activation (rolejudge), sorted by kind.
	withheld []string
	// now is when the request was assessed.
	now time.Time
}

// Gather reads the request's policy and, for an Active request, its
// extension's APIs, assesses the request and compiles its grant.
func (r *Reconciler) Gather(ctx context.Context, ar *oriav1alpha1.AccessRequest) (*plan, error) {
	now := r.opts.Now()
	var p *oriav1alpha1.RBACPolicy
	pol := &oriav1alpha1.RBACPolicy{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Name: ar.Spec.PolicyName}, pol); {
	case err == nil:
		if pol.DeletionTimestamp.IsZero() {
			p = pol
		}
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("getting RBACPolicy %q: %w", ar.Spec.PolicyName, err)
	}
	pl := &plan{assessment: eligibility.Assess(ar, p, now), now: now}
	if pl.assessment.State != oriav1alpha1.StateActive {
		return pl, nil
	}
	crds, err := lookup.ExtensionCRDs(ctx, r.Client, p.Spec.ExtensionName)
	if err != nil {
		return nil, err
	}
	pl.compiled = eligibility.Activation(ar, p, pl.assessment, crds)
	if pl.compiled.Template == nil {
		return pl, nil
	}
	// The roles are judged as the policy's own controller judges them
	// (rolejudge): an activation binds no role its policy would withhold
	// (someone else's role under oria's name, a changed one, a bundle role
	// beyond its extension).
	ext := &ocv1.ClusterExtension{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Name: p.Spec.ExtensionName}, ext); {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		pl.withheld = []string{fmt.Sprintf("ClusterExtension %q is not installed", p.Spec.ExtensionName)}
		pl.compiled.Withhold(allRoles(pl.compiled.Roles, pl.withheld[0]))
		return pl, nil
	case err != nil:
		return nil, fmt.Errorf("getting ClusterExtension %q: %w", p.Spec.ExtensionName, err)
	}
	res, err := r.roleJudge().Roles(ctx, ext, crds, pl.compiled.Roles)
	if err != nil {
		return nil, err
	}
	pl.withheld = slices.Concat(res.Foreign, res.TooBroad, res.Pending)
	pl.compiled.Withhold(res.Withheld)
	return pl, nil
}

// allRoles maps each of roles to why.
func allRoles(roles []string, why string) map[string]string {
	out := make(map[string]string, len(roles))
	for _, r := range roles {
		out[r] = why
	}
	return out
}

// roleJudge reads roles from the cache, the API server and the bundle-role
// cache.
func (r *Reconciler) roleJudge() rolejudge.Judge {
	return rolejudge.Judge{Cache: r.Client, APIReader: r.APIReader, BundleRoles: r.BundleRoles}
}

// Requeue looks again when the assessment changes by time alone (the end of
// the grant, the request's timeout), and after the recheck interval at a
// conflict.
func (r *Reconciler) Requeue(p *plan, out result) reconciler.Requeue {
	q := reconciler.Requeue{At: p.assessment.Next}
	if out.conflict != "" || len(p.withheld) > 0 {
		q.After = r.opts.ConflictRecheckInterval
	}
	return q
}

// Now is the clock the skeleton measures Requeue.At by (reconciler.Clock).
func (r *Reconciler) Now() time.Time { return r.opts.Now() }
