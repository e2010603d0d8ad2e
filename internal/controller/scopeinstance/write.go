package scopeinstance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/publisher"
)

// result is what the writes of one reconcile did.
type result struct {
	summary engine.Summary
	// ensured are the outcomes of the wanted bindings, those the ceiling
	// refused (Forbidden) included.
	ensured []engine.Outcome
	// written are the outcomes of the bindings written, deleted those of
	// the bindings deleted, kind by kind (the Events count them).
	written, deleted engine.SetOutcome
	// boundAt is when the wanted bindings were written (the binding
	// latency is measured to it).
	boundAt time.Time
	// bound are the target namespaces where every wanted binding is in
	// place, computed once (reach) for both the publication and
	// status.boundNamespaces.
	bound []string
	// published is what the publication did.
	published publisher.Outcome
	// revoked counts the bindings deleted because the spec or the ceiling
	// no longer allows them, or the window closed.
	revoked int
	// emptied names the gate emptied at the expiry (its bindings, the
	// plan's revoke, are deleted by the next reconcile).
	emptied string
	// gateless: the instance's gate could not be created, so nothing was
	// bound.
	gateless bool
	// done: the writes ran to their end (Report owes their Events).
	done bool
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

// summarizeErrors returns one error for many failed writes, naming the
// first few, so a status message stays readable when a thousand namespaces
// fail the same way.
func summarizeErrors(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	if len(errs) <= 3 {
		return errors.Join(errs...)
	}
	msgs := make([]string, 3)
	for i := range msgs {
		msgs[i] = errs[i].Error()
	}
	return fmt.Errorf("%d writes failed, including: %s", len(errs), strings.Join(msgs, "; "))
}

// unwatched reports whether the outcome depends on what oria does not
// watch, so that only a look after a while notices a change: someone
// else's object in conflict (a binding, a ClusterRole, a ConfigMap key),
// what the ServiceAccount may grant (refused), the referenced roles of an
// instance with a ceiling (see ceiling.go).
func (res result) unwatched(p *plan) bool {
	return len(res.conflicts(p)) > 0 || res.refused() || res.published.Conflict != "" || p.hasCeiling
}

// Write carries out the plan, in one order for every action, so that a
// changed role never leaves a gap without access, nothing is granted
// early, and a published namespace always has its bindings (what the
// ceiling's ServiceAccount may grant was asked while gathering):
//
//  1. the gate first (writeGateFirst): created (a binding is never made
//     to a name no role holds), emptied or narrowed; outside the window
//     emptied, which ends the grant: the rest is the next reconcile's;
//  2. bind: the bindings ensured (engine.EnsureSet, as the ceiling's
//     ServiceAccount when the instance names one: writerFor), what the
//     ceiling no longer allows deleted at once (as oria), then the gate
//     filled;
//  3. the publication (publisher.Publisher.Publish, whose writes are the
//     engine's): the namespaces bound now, none outside the window;
//  4. the deletions (engine.DeleteSet, as oria: taking access away needs
//     no ceiling): the stale bindings, every binding outside the window,
//     those a spec error no longer allows;
//  5. the gate last, once its bindings are gone (deleteGate).
//
// Report (events.go) then records what it did: the binding latency and
// the Events.
func (r *Reconciler) Write(ctx context.Context, si *oriav1alpha1.ScopeInstance, p *plan) (result, error) {
	var res result
	gate := r.writeGateFirst(ctx, si, p.gate)
	switch g := engine.Summarize(gate); {
	case p.gate.op == gateCreate && len(g.Errors)+len(g.Conflicts) > 0:
		// No gate, no binding of it: a binding is never made to a name no
		// role of this instance's holds. A conflict is reported as such,
		// an error retried.
		res = result{summary: g, gateless: true}
		return res, res.err()
	case p.gate.op == gateEnd && len(gate) > 0 && len(g.Errors) == 0:
		// The grant ended with that write. Its bindings, which grant
		// nothing now, are deleted by the next reconcile (again), at
		// routine priority: after the other grants' work at the same
		// instant.
		res = result{summary: g, emptied: p.gate.cur.Name, again: true}
		res.published = r.publisher().Publish(ctx, si, false, nil, false)
		return res, res.err()
	}
	var revoked engine.SetOutcome
	var whole bool
	if p.action == bindAll {
		var err error
		if res.written, revoked, err = r.bind(ctx, si, p); err != nil {
			return result{}, err
		}
		res.boundAt = time.Now()
		if p.gate.op == gateFill {
			gate = r.writeGate(ctx, si, p.gate) // filled once its bindings are in place
		}
		res.ensured, res.bound, whole = reach(p, res.written, gate)
	}
	if p.action != revokeOnly {
		res.published = r.publisher().Publish(ctx, si, p.action == bindAll && p.targets.Cluster, res.bound, whole)
	}
	res.deleted = revoked.Plus(engine.DeleteSet(ctx, r.writer(), p.revoke))
	all := res.deleted.All()
	res.summary = engine.Summarize(res.ensured, all, gate, r.deleteGate(ctx, p.gate, all))
	res.revoked = len(all)
	if p.action == bindAll {
		res.revoked = revoked.Len()
	}
	res.done = true
	return res, res.err()
}

// gateKind writes gates: whole (its labels, its rules, no
// aggregationRule), every change one update, since emptying the gate is
// what ends the grant.
var gateKind = engine.WholeClusterRoleKind()

// writeGateFirst writes the gate when it goes before the bindings:
// created or narrowed (gateCreate, gateNarrow), or emptied (gateEnd, when
// it holds rules: one update, never a create), and returns the outcome.
func (r *Reconciler) writeGateFirst(ctx context.Context, si *oriav1alpha1.ScopeInstance, g gatePlan) []engine.Outcome {
	switch {
	case g.op == gateCreate || g.op == gateNarrow:
		return r.writeGate(ctx, si, g)
	case g.op == gateEnd && g.want != nil:
		return engine.Rewrite(ctx, r.writer(), gateKind, managed, []*rbacv1.ClusterRole{g.cur}, []*rbacv1.ClusterRole{g.want})
	}
	return nil
}

// writeGate writes g.want, and returns the outcome.
func (r *Reconciler) writeGate(ctx context.Context, si *oriav1alpha1.ScopeInstance, g gatePlan) []engine.Outcome {
	cached := map[types.NamespacedName]*rbacv1.ClusterRole{}
	if g.cur != nil {
		cached[engine.Key(g.cur)] = g.cur
	}
	owns := func(o client.Object) bool { return ownership.ControlledByUID(o, si.UID) }
	return engine.Ensure(ctx, r.writer(), gateKind, owns, []*rbacv1.ClusterRole{g.want}, cached)
}

// holdGate makes each of bindings that names the instance's gate block the
// gate's deletion (binding.HoldGate), by its UID: the cached gate's, or,
// when it was created (or replaced) just now, the API server's.
func (r *Reconciler) holdGate(ctx context.Context, si *oriav1alpha1.ScopeInstance, g gatePlan, bindings binding.Set) error {
	if !g.wanted() || bindings.Len() == 0 {
		return nil
	}
	uid := types.UID("")
	if g.cur != nil && g.cur.DeletionTimestamp.IsZero() {
		uid = g.cur.UID
	} else {
		live := &rbacv1.ClusterRole{}
		err := r.APIReader.Get(ctx, types.NamespacedName{Name: g.want.Name}, live)
		switch {
		case apierrors.IsNotFound(err):
			// Not created (a conflict, reported), or gone again: the next
			// reconcile creates it, and then its bindings.
			return fmt.Errorf("the gate %q of this time-bound grant does not exist yet", g.want.Name)
		case err != nil:
			return fmt.Errorf("reading the gate %q: %w", g.want.Name, err)
		case !ownership.ControlledByUID(live, si.UID):
			return fmt.Errorf("ClusterRole %q, the gate of this time-bound grant, was not created by oria for this instance", g.want.Name)
		}
		uid = live.UID
	}
	bindings.HoldGate(binding.GateHold(g.want.Name, uid))
	return nil
}

// emptyGates removes the rules of gates (oria's, as the cache shows them)
// that have any, but their seal, so that their bindings grant nothing
// before they go (binding.EmptiedGate): one update each, never a create (a
// gate being deleted is emptied as it is).
func (r *Reconciler) emptyGates(ctx context.Context, gates []*rbacv1.ClusterRole) []engine.Outcome {
	cur, emptied := binding.EmptiedGates(gates)
	return engine.Rewrite(ctx, r.writer(), gateKind, managed, cur, emptied)
}

// managed reports whether oria made obj (ownership.IsManaged).
func managed(obj client.Object) bool { return ownership.IsManaged(obj) }

// deleteGate deletes a gate that is no longer wanted, once its bindings
// are deleted (deleted: those deletions): a binding is never left to a
// name no role holds.
func (r *Reconciler) deleteGate(ctx context.Context, g gatePlan, deleted []engine.Outcome) []engine.Outcome {
	if (g.op != gateEnd && g.op != gateDelete) || len(engine.Summarize(deleted).Errors) > 0 {
		return nil
	}
	return engine.Delete(ctx, r.writer(), gateKind.Name, []*rbacv1.ClusterRole{g.cur})
}

// bind writes the wanted bindings of a bindAll plan, then deletes, as
// oria, at once, those the ceiling no longer allows (p.drop, and those
// whose rewrite it refused), and returns the outcomes of the writes and of
// those deletions.
func (r *Reconciler) bind(ctx context.Context, si *oriav1alpha1.ScopeInstance, p *plan) (written, revoked engine.SetOutcome, err error) {
	w, err := r.writerFor(si)
	if err != nil {
		return nil, nil, err
	}
	if err := r.holdGate(ctx, si, p.gate, p.want); err != nil {
		return nil, nil, err
	}
	instanceOwns := ownership.InstanceOwner(si.Name)
	owns := func(o client.Object) bool { return instanceOwns(o) }
	written = engine.EnsureSet(ctx, w, owns, p.want, p.existing)
	if p.ceiling != nil {
		// What the ceiling no longer allows goes as soon as it is known,
		// before anything else is written.
		revoked = engine.DeleteSet(ctx, r.writer(), p.drop.Plus(refusedRewrites(written.All(), p.want, p.existing)))
	}
	return written, revoked, nil
}

// conflicts are the sentences naming what a reconcile left alone: the
// gate's name held by someone else, inline roles in conflict, and the
// writes that found someone else's object (of the gate alone when it could
// not be created; none when the writes did not run to their end).
func (res result) conflicts(p *plan) []string {
	var out []string
	switch {
	case res.gateless:
	case !res.done:
		return nil
	default:
		if p.gate.conflict != "" && p.action == bindAll {
			out = append(out, p.gate.conflict)
		}
		for _, role := range p.conflicted {
			out = append(out, fmt.Sprintf("ClusterRole %q of ScopeTemplate %q exists and was not created by oria for the template", role, p.template.Name))
		}
	}
	for _, c := range res.summary.Conflicts {
		out = append(out, c.Error())
	}
	return out
}

// Cleanup removes the bindings and the gate of a deleted instance, and
// what it published.
func (r *Reconciler) Cleanup(ctx context.Context, instance string) error {
	r.spacing.Forget(instance)
	r.windowEvents.forget(instance)
	if err := r.publisher().Withdraw(ctx, instance, nil); err != nil {
		return err
	}
	existing, err := r.existingBindings(instance)
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
	deleted := engine.DeleteSet(ctx, w, existing).All()
	var deletedGates []engine.Outcome
	if len(engine.Summarize(deleted).Errors) == 0 {
		deletedGates = engine.Delete(ctx, w, gateKind.Name, gates)
	}
	s := engine.Summarize(emptied, deleted, deletedGates)
	if n := s.Count[engine.Deleted]; n > 0 {
		ctrl.LoggerFrom(ctx).Info("deleted the bindings of a deleted ScopeInstance", "count", n)
	}
	return summarizeErrors(s.Errors)
}

// writer is the engine's writer of one reconcile, writing as oria.
func (r *Reconciler) writer() *engine.Writer {
	return r.Base.Writer(r.recheck(), r.opts.Workers)
}

// writerFor returns the writer of si's bindings: oria's own, or, for an
// instance with a ceiling, one that grants as its ServiceAccount.
func (r *Reconciler) writerFor(si *oriav1alpha1.ScopeInstance) (*engine.Writer, error) {
	w := r.writer()
	if sa := si.Spec.ServiceAccount; sa != nil {
		c, err := r.Impersonators.For(sa.Namespace, sa.Name)
		if err != nil {
			return nil, err
		}
		w.Client, w.Ceiling = c, true
	}
	return w, nil
}

// reach returns what the writes of a bindAll plan reach, computed once for
// both the publication and the status, from the bindings' outcomes
// (written) and the gate's (writeGateFirst's, or the fill's):
//   - ensured: the outcomes of the wanted bindings, those the ceiling
//     refused (p.refused) included;
//   - bound: the target namespaces where every wanted binding is in place
//     (p.unbound: those where a binding of a pending role is missing),
//     sorted; none while the gate holds no rule, before the window or when
//     filling it failed (the bindings grant nothing then);
//   - whole: every wanted binding is in place and grants, nothing failed,
//     was refused, is in conflict, pending or deferred (what a cluster-wide
//     grant publishes).
func reach(p *plan, written engine.SetOutcome, gate []engine.Outcome) (ensured []engine.Outcome, bound []string, whole bool) {
	ensured = append(written.All(), p.refused...)
	s := engine.Summarize(ensured)
	unfilled := p.gate.wanted() && !p.gate.filled()
	if g := engine.Summarize(gate); p.gate.op == gateFill && len(g.Errors)+len(g.Conflicts) > 0 {
		unfilled = true
	}
	whole = !unfilled && len(s.Errors)+len(s.Conflicts)+len(s.Forbidden) == 0 && len(p.pending)+len(p.conflicted)+p.deferred == 0
	if p.targets.Cluster || unfilled {
		return ensured, nil, whole
	}
	for _, ns := range p.targets.Namespaces {
		if !s.Bad[ns] && !s.Skipped[ns] && !p.unbound[ns] {
			bound = append(bound, ns)
		}
	}
	return ensured, bound, whole
}
