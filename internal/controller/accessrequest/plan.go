package accessrequest

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/eligibility"
	"github.com/operator-framework/oria/internal/lookup"
	policymodel "github.com/operator-framework/oria/internal/policy"
	"github.com/operator-framework/oria/internal/reconciler"
)

// plan is what one reconcile of a request read and decided.
type plan struct {
	// verdict is what the request is now (eligibility.Judge).
	verdict eligibility.Verdict
	// compiled is the grant of an Active request (eligibility.Activation);
	// its Template is nil when there is nothing to bind (not Active, or
	// the extension provides none of the policy's APIs).
	compiled policymodel.Compiled
	// now is when the request was judged.
	now time.Time
}

// Gather reads the request's policy and, for an Active request, its
// extension's APIs, judges the request and compiles its grant.
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
	pl := &plan{verdict: eligibility.Judge(ar, p, now), now: now}
	if pl.verdict.State != oriav1alpha1.StateActive {
		return pl, nil
	}
	crds, err := lookup.ExtensionCRDs(ctx, r.Client, p.Spec.ExtensionName)
	if err != nil {
		return nil, err
	}
	pl.compiled = eligibility.Activation(ar, p, pl.verdict, crds)
	return pl, nil
}

// Requeue looks again when the verdict changes by time alone (the end of
// the grant, the request's timeout), and after the recheck interval at a
// conflict.
func (r *Reconciler) Requeue(p *plan, out result) reconciler.Requeue {
	q := reconciler.Requeue{At: p.verdict.Next}
	if out.conflict != "" {
		q.After = r.opts.ConflictRecheckInterval
	}
	return q
}

// Now is the clock the skeleton measures Requeue.At by (reconciler.Clock).
func (r *Reconciler) Now() time.Time { return r.opts.Now() }
