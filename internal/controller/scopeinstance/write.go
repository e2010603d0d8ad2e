package scopeinstance

import (
	"context"
	"errors"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/publisher"
)

// Cleanup removes the bindings and the gate of a deleted instance, and
// what it published.
func (r *Reconciler) Cleanup(ctx context.Context, instance string) error {
	r.spacing.Forget(instance)
	r.windowEvents.forget(instance)
	if err := r.publisher().Withdraw(ctx, instance, nil); err != nil {
		return err
	}
	rbs, crbs, err := r.existingBindings(instance)
	if err != nil {
		return err
	}
	gates, err := r.gatesOf(ctx, instance)
	if err != nil {
		return err
	}
	w := r.writer()
	// A gate is emptied first: its bindings then grant nothing at once. It
	// goes last, never leaving a binding to a name no role holds.
	emptied := r.emptyGates(ctx, gates)
	deletedRBs := engine.Delete(ctx, w, engine.RoleBindingKind.Name, rbs)
	deletedCRBs := engine.Delete(ctx, w, engine.ClusterRoleBindingKind.Name, crbs)
	var deletedGates []engine.Outcome
	if len(engine.Summarize(deletedRBs, deletedCRBs).Errors) == 0 {
		deletedGates = engine.Delete(ctx, w, gateKind.Name, gates)
	}
	s := engine.Summarize(emptied, deletedRBs, deletedCRBs, deletedGates)
	if n := s.Count[engine.Deleted]; n > 0 {
		ctrl.LoggerFrom(ctx).Info("deleted the bindings of a deleted ScopeInstance", "count", n)
	}
	return summarizeErrors(s.Errors)
}

// writer is the engine's writer of one reconcile, writing as oria.
func (r *Reconciler) writer() *engine.Writer {
	return r.Base.Writer(r.recheck(), r.opts.Workers)
}

// result is what the writes of one reconcile did.
type result struct {
	summary    engine.Summary
	ensuredRBs []engine.Outcome
	// conflicts are sentences naming what was left alone.
	conflicts []string
	// bound are the target namespaces where every intended binding is in
	// place, computed once (boundNamespaces) for both the publication and
	// status.boundNamespaces.
	bound []string
	// published is what the publication did.
	published publisher.Outcome
	// revoked counts the bindings deleted because the ServiceAccount no
	// longer vouches for what their role grants.
	revoked int
	// emptied names the gate emptied at the expiry, and left counts its
	// bindings, deleted by the next reconcile (window.go).
	emptied string
	left    int
	// gateless: the instance's gate could not be created, so nothing was
	// bound (gateMissing).
	gateless bool
	// again: look again at once (the gate was emptied at the expiry, its
	// bindings are deleted next).
	again bool
}

// refused reports whether the ServiceAccount may not write some bindings.
func (res result) refused() bool { return len(res.summary.Forbidden) > 0 }

// err is the one error of a reconcile's writes: the failed writes
// (summarizeErrors) and a failed publication.
func (res result) err() error {
	return errors.Join(summarizeErrors(res.summary.Errors), res.published.Err)
}

// unwatched reports whether the outcome depends on what oria does not
// watch, so that only a look after a while notices a change: someone
// else's object in conflict (a binding, a ClusterRole, a ConfigMap key),
// what the ServiceAccount may grant (refused), the referenced roles of an
// instance with a ceiling (see ceiling.go).
func (res result) unwatched(p *plan) bool {
	return len(res.conflicts) > 0 || res.refused() || res.published.Conflict != "" || p.hasCeiling()
}

// write carries out a bind plan: it creates and repairs first, publishes
// (publisher.Publisher), deletes after, so that a changed role never leaves a
// gap without access and a published namespace always has its bindings.
// A gated instance's gate is written before or after its bindings, and
// deleted last when it is no longer wanted (gate.go).
// For an instance with a ceiling, the ServiceAccount is asked first about
// roles whose new rules are held back, and a binding it no longer vouches
// for is deleted at once (see ceiling.go). The calls, in order:
//
//   - writerFor (serviceaccount.go): oria's writer, or one granting as the
//     ceiling ServiceAccount;
//   - vouch (ceiling.go): authz.Authorizer.CheckEachBind for the
//     ServiceAccount;
//   - engine.Ensure of the RoleBindings and ClusterRoleBindings
//     (engine/ensure.go);
//   - revoke (ceiling.go): engine.Delete of what the ServiceAccount no
//     longer vouches for;
//   - publisher.Publisher.Publish (publish/publisher.go), whose writes are
//     engine.ApplyKey, CreateNew, Disown, ApplyRestart (engine/shared.go);
//   - engine.Delete of the stale bindings (engine/ensure.go).
func (r *Reconciler) write(ctx context.Context, si *oriav1alpha1.ScopeInstance, p *bindPlan) (result, error) {
	w, err := r.writerFor(si)
	if err != nil {
		return result{}, err
	}
	instanceOwns := ownership.InstanceOwner(si.Name)
	owns := func(o client.Object) bool { return instanceOwns(o) }
	existingRBs, existingCRBs := engine.ByKey(p.existingRBs), engine.ByKey(p.existingCRBs)
	v := vouched{rbs: p.wantRBs, crbs: p.wantCRBs}
	if p.ceiling != nil {
		if v, err = r.vouch(ctx, p.ceiling, p, existingRBs, existingCRBs); err != nil {
			return result{}, err
		}
	}
	var gate []engine.Outcome
	if p.gate.gateFirstNow() {
		gate = r.writeGate(ctx, si, p.gate)
		if g := engine.Summarize(gate); p.gate.cur == nil && len(g.Errors)+len(g.Conflicts) > 0 {
			// No gate, no binding of it: a binding is never made to a
			// name no role of this instance's holds.
			return r.gateMissing(si, g), nil
		}
	}
	if err := r.holdGate(ctx, si, p.gate, v.rbs); err != nil {
		return result{}, err
	}
	ensuredRBs := engine.Ensure(ctx, w, engine.RoleBindingKind, owns, v.rbs, existingRBs)
	ensuredCRBs := engine.Ensure(ctx, w, engine.ClusterRoleBindingKind, owns, v.crbs, existingCRBs)
	if !p.gate.gateFirstNow() {
		gate = r.writeGate(ctx, si, p.gate) // filled once its bindings are in place
	}
	revokedRBs, revokedCRBs := revoke(ctx, w, v, ensuredRBs, ensuredCRBs, existingRBs, existingCRBs)
	ensuredRBs, ensuredCRBs = append(ensuredRBs, v.refusedRBs...), append(ensuredCRBs, v.refusedCRBs...)
	r.latency.Bound(si.Name, ensuredRBs)
	ensured := engine.Summarize(ensuredRBs, ensuredCRBs)
	bound := boundNamespaces(si.Name, p, ensured)
	if p.gate != nil && p.gate.want != nil && !p.gate.filled() {
		// Bound to an empty gate before the window: nothing is granted.
		bound = nil
	}
	clusterOK := len(ensured.Errors)+len(ensured.Conflicts)+len(ensured.Forbidden) == 0 && len(p.pending)+len(p.conflicted)+p.withheld == 0
	pubs := r.publisher().Publish(ctx, si, p.targets.Cluster, bound, clusterOK)
	deletedRBs := append(revokedRBs, engine.Delete(ctx, w, engine.RoleBindingKind.Name, p.staleRBs)...)
	deletedCRBs := append(revokedCRBs, engine.Delete(ctx, w, engine.ClusterRoleBindingKind.Name, p.staleCRBs)...)
	res := result{summary: engine.Summarize(ensuredRBs, ensuredCRBs, deletedRBs, deletedCRBs, gate, r.deleteGate(ctx, p.gate, deletedRBs)), ensuredRBs: ensuredRBs,
		bound: bound, published: pubs, revoked: len(revokedRBs) + len(revokedCRBs)}
	if p.gate != nil && p.gate.conflict != "" {
		res.conflicts = append(res.conflicts, p.gate.conflict)
	}
	for _, role := range p.conflicted {
		res.conflicts = append(res.conflicts, fmt.Sprintf("ClusterRole %q of ScopeTemplate %q exists and was not created by oria for the template", role, p.template.Name))
	}
	for _, c := range res.summary.Conflicts {
		res.conflicts = append(res.conflicts, c.Error())
	}
	r.recordEvents(si, ensuredRBs, ensuredCRBs, deletedRBs, deletedCRBs, res.conflicts)
	return res, nil
}
