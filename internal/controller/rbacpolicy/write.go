package rbacpolicy

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/ownership"
	policymodel "github.com/operator-framework/oria/internal/policy"
	"github.com/operator-framework/oria/internal/record"
	"github.com/operator-framework/oria/internal/status"
)

// result is what act did.
type result struct {
	// conflict names the same-name objects the policy does not control.
	conflict string
	// instance is the compiled ScopeInstance as the cache shows it (nil
	// before it exists).
	instance *oriav1alpha1.ScopeInstance
}

// writer returns the engine writer of the compiled objects. Every write the
// controller makes goes through it: a compiled object is created (never
// upserted), repaired by replacing its whole spec, and deleted with a UID
// precondition.
func (r *Reconciler) writer() *engine.Writer {
	return r.Base.Writer(r.opts.ConflictRecheckInterval, 0)
}

// Write carries out the plan's decision: write the compiled objects, the
// narrowed ones, or revoke them.
func (r *Reconciler) Write(ctx context.Context, policy *oriav1alpha1.RBACPolicy, p *plan) (result, error) {
	r.warnForeign(policy, p)
	tmpl, inst := p.compiled.Template, p.compiled.Instance
	switch p.decision {
	case decisionRevoke:
		return result{}, r.revoke(ctx, policy, p.message)
	case decisionNarrow:
		tmpl, inst = p.narrowed.Template, p.narrowed.Instance
	}
	conflict, changed, err := r.ensure(ctx, policy, tmpl, inst)
	if err != nil || conflict != "" {
		if conflict != "" {
			r.Recorder.Eventf(policy, nil, corev1.EventTypeWarning, oriav1alpha1.ReasonConflict, "Compile", conflict)
		}
		return result{conflict: conflict}, err
	}
	if changed && p.decision == decisionNarrow && len(p.narrowed.Removed) > 0 {
		r.Recorder.Eventf(policy, nil, corev1.EventTypeNormal, "Narrowed", "Apply",
			"%s: kept only what the current spec still allows; removed %s", p.reason, status.Enumerate(p.narrowed.Removed, 5))
	}
	cur := &oriav1alpha1.ScopeInstance{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(inst), cur); err != nil {
		if apierrors.IsNotFound(err) {
			// Just created; the cache has not seen it yet. Its creation
			// event requeues the policy.
			return result{}, nil
		}
		return result{}, fmt.Errorf("getting ScopeInstance %q: %w", inst.Name, err)
	}
	return result{instance: cur}, nil
}

// warnForeign records a Warning event naming the roles under generated
// names that are not oria's, when the policy does not say so already (a
// Conflict is warned about where it is found, not on the Ready transition).
func (r *Reconciler) warnForeign(policy *oriav1alpha1.RBACPolicy, p *plan) {
	if len(p.foreign) == 0 {
		return
	}
	msg := strings.Join(p.foreign, "; ")
	if c := meta.FindStatusCondition(policy.Status.Conditions, oriav1alpha1.TypeReady); c != nil &&
		c.Reason == oriav1alpha1.ReasonConflict && strings.Contains(c.Message, msg) {
		return
	}
	// The recorder cuts the note to the API's limit
	// (reconciler.LimitEvents); the condition keeps the full text.
	r.Recorder.Eventf(policy, nil, corev1.EventTypeWarning, oriav1alpha1.ReasonConflict, "Bind", "%s; not bound", msg)
}

// ensure makes the template and instance exist exactly as given, through
// the engine, and says whether it changed either. An object of the same
// name that the policy does not control (by its UID) is a conflict: it is
// named in the returned message and never modified.
func (r *Reconciler) ensure(ctx context.Context, policy *oriav1alpha1.RBACPolicy, t *oriav1alpha1.ScopeTemplate, i *oriav1alpha1.ScopeInstance) (string, bool, error) {
	w := r.writer()
	owns := func(o client.Object) bool { return ownership.ControlledByUID(o, policy.UID) }
	tmplCached, err := cached(ctx, r.Client, t)
	if err != nil {
		return "", false, err
	}
	tmpl := engine.Ensure(ctx, w, engine.ScopeTemplateKind, owns, []*oriav1alpha1.ScopeTemplate{t}, tmplCached)
	instCached, err := cached(ctx, r.Client, i)
	if err != nil {
		return "", false, err
	}
	inst := engine.Ensure(ctx, w, engine.ScopeInstanceKind, owns, []*oriav1alpha1.ScopeInstance{i}, instCached)

	var conflicts []string
	var errs []error
	changed := false
	for n, o := range []engine.Outcome{tmpl[0], inst[0]} {
		kind := []string{engine.ScopeTemplateKind.Name, engine.ScopeInstanceKind.Name}[n]
		switch o.Action {
		case engine.Conflict:
			conflicts = append(conflicts, fmt.Sprintf("%s %q exists and was not created by this RBACPolicy", kind, o.Name))
		case engine.Failed, engine.Forbidden:
			errs = append(errs, o.Err)
		case engine.Created, engine.Updated, engine.Replaced:
			changed = true
			if n == 0 {
				r.Recorder.Eventf(policy, nil, corev1.EventTypeNormal, "Compiled", "Apply",
					"ScopeTemplate %q binds %d ClusterRoles", o.Name, len(t.Spec.ClusterRoles))
			} else {
				r.Recorder.Eventf(policy, nil, corev1.EventTypeNormal, "Compiled", "Apply", "ScopeInstance %q targets %s", o.Name, describeInstance(i))
				if rec := record.Grant.Of(policy.Annotations); o.Action == engine.Created && !rec.Empty() {
					r.Recorder.Eventf(policy, nil, corev1.EventTypeNormal, "Granted", "Apply", "%s access granted %s", policy.Spec.Access, rec)
				}
			}
		}
	}
	if len(conflicts) > 0 {
		return strings.Join(conflicts, "; ") + "; rename or delete it", changed, errors.Join(errs...)
	}
	return "", changed, errors.Join(errs...)
}

// cached returns want's object as oria's cache shows it, keyed for
// engine.Ensure (empty when the cache does not have it).
func cached[T client.Object](ctx context.Context, c client.Reader, want T) (map[types.NamespacedName]T, error) {
	cur := want.DeepCopyObject().(T)
	if err := c.Get(ctx, engine.Key(want), cur); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("getting %T %q: %w", want, want.GetName(), err)
	}
	return map[types.NamespacedName]T{engine.Key(want): cur}, nil
}

// Cleanup removes the objects compiled from a deleted policy. The
// ownerReferences would let the garbage collector do it too; doing it here
// makes revocation immediate and works without the garbage collector.
func (r *Reconciler) Cleanup(ctx context.Context, policy string) error {
	_, err := r.deleteCompiled(ctx, policy, "")
	return err
}

// deleteCompiled deletes, through the engine, the ScopeTemplate and
// ScopeInstance compiled from the named policy: those carrying its labels
// and controlled by it (by UID when uid is set, else by an RBACPolicy
// controller reference of that name, the policy being gone). It returns
// how many it deleted.
func (r *Reconciler) deleteCompiled(ctx context.Context, policy string, uid types.UID) (int, error) {
	sel := client.MatchingLabels(policymodel.PolicyLabels(policy))
	compiledBy := func(o client.Object) bool {
		if uid != "" {
			return ownership.ControlledByUID(o, uid)
		}
		return ownership.ControllerName(o.GetOwnerReferences(), ownership.KindRBACPolicy) == policy
	}
	var instances oriav1alpha1.ScopeInstanceList
	if err := r.Client.List(ctx, &instances, sel); err != nil {
		return 0, fmt.Errorf("listing ScopeInstances of RBACPolicy %q: %w", policy, err)
	}
	var templates oriav1alpha1.ScopeTemplateList
	if err := r.Client.List(ctx, &templates, sel); err != nil {
		return 0, fmt.Errorf("listing ScopeTemplates of RBACPolicy %q: %w", policy, err)
	}
	var si []*oriav1alpha1.ScopeInstance
	for i := range instances.Items {
		if compiledBy(&instances.Items[i]) {
			si = append(si, &instances.Items[i])
		}
	}
	var st []*oriav1alpha1.ScopeTemplate
	for i := range templates.Items {
		if compiledBy(&templates.Items[i]) {
			st = append(st, &templates.Items[i])
		}
	}
	w := r.writer()
	outcomes := append(engine.Delete(ctx, w, engine.ScopeInstanceKind.Name, si), engine.Delete(ctx, w, engine.ScopeTemplateKind.Name, st)...)
	var errs []error
	for _, o := range outcomes {
		errs = append(errs, o.Err)
	}
	return len(outcomes), errors.Join(errs...)
}

// revoke removes the compiled objects of a policy that currently grants
// nothing, emitting an event (saying why) when there was something to
// remove.
func (r *Reconciler) revoke(ctx context.Context, policy *oriav1alpha1.RBACPolicy, why string) error {
	n, err := r.deleteCompiled(ctx, policy.Name, policy.UID)
	if err != nil || n == 0 {
		return err
	}
	if rec := record.Revocation.Of(policy.Annotations); !rec.Empty() {
		why += "; revoked " + rec.String()
	}
	r.Recorder.Eventf(policy, nil, corev1.EventTypeNormal, "Revoked", "Delete", "removed the grant: %s", why)
	return nil
}
