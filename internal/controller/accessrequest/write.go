package accessrequest

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/eligibility"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/ownership"
)

// result is what Write did.
type result struct {
	// conflict names same-name objects the request does not control.
	conflict string
	// instance is the compiled ScopeInstance as the API server has it (nil
	// before it exists, or when not Active).
	instance *oriav1alpha1.ScopeInstance
}

// writer returns the engine writer of the compiled objects.
func (r *Reconciler) writer() *engine.Writer {
	return r.Base.Writer(r.opts.ConflictRecheckInterval, 0)
}

// Write keeps the grant of an Active request in place, and removes it
// otherwise.
func (r *Reconciler) Write(ctx context.Context, ar *oriav1alpha1.AccessRequest, p *plan) (result, error) {
	if p.compiled.Template == nil {
		return result{}, r.deleteCompiled(ctx, ar.Name, ar.UID)
	}
	return r.ensure(ctx, ar, p.compiled.Template, p.compiled.Instance)
}

// ensure makes the compiled template and instance exist exactly as given,
// through the engine; an object of the same name the request does not
// control (by UID) is a conflict, named and never modified.
func (r *Reconciler) ensure(ctx context.Context, ar *oriav1alpha1.AccessRequest, t *oriav1alpha1.ScopeTemplate, i *oriav1alpha1.ScopeInstance) (result, error) {
	w := r.writer()
	owns := func(o client.Object) bool { return ownership.ControlledByUID(o, ar.UID) }
	tc, err := cached(ctx, r.Client, t)
	if err != nil {
		return result{}, err
	}
	outcomes := engine.Ensure(ctx, w, engine.ScopeTemplateKind, owns, []*oriav1alpha1.ScopeTemplate{t}, tc)
	ic, err := cached(ctx, r.Client, i)
	if err != nil {
		return result{}, err
	}
	outcomes = append(outcomes, engine.Ensure(ctx, w, engine.ScopeInstanceKind, owns, []*oriav1alpha1.ScopeInstance{i}, ic)...)
	var res result
	var errs []error
	for _, o := range outcomes {
		switch o.Action {
		case engine.Conflict:
			res.conflict = fmt.Sprintf("%q exists and was not created for this AccessRequest; rename or delete it", o.Name)
		case engine.Failed, engine.Forbidden:
			errs = append(errs, o.Err)
		}
	}
	if err := errors.Join(errs...); err != nil || res.conflict != "" {
		return res, err
	}
	cur := &oriav1alpha1.ScopeInstance{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(i), cur); err != nil {
		if apierrors.IsNotFound(err) {
			return res, nil // just created; its event requeues the request
		}
		return res, fmt.Errorf("getting ScopeInstance %q: %w", i.Name, err)
	}
	res.instance = cur
	return res, nil
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

// Cleanup removes the grant of a request that is gone.
func (r *Reconciler) Cleanup(ctx context.Context, name string) error {
	return r.deleteCompiled(ctx, name, "")
}

// deleteCompiled deletes, through the engine, the ScopeInstance and
// ScopeTemplate compiled for the named request: those carrying its label
// and controlled by it (by UID when uid is set, else by an AccessRequest
// controller reference of that name, the request being gone).
func (r *Reconciler) deleteCompiled(ctx context.Context, request string, uid types.UID) error {
	sel := client.MatchingLabels(ownership.AccessRequestLabels(request))
	compiledFor := func(o client.Object) bool {
		if uid != "" {
			return ownership.ControlledByUID(o, uid)
		}
		return ownership.ControllerName(o.GetOwnerReferences(), ownership.KindAccessRequest) == request
	}
	var instances oriav1alpha1.ScopeInstanceList
	if err := r.Client.List(ctx, &instances, sel); err != nil {
		return fmt.Errorf("listing ScopeInstances of AccessRequest %q: %w", request, err)
	}
	var templates oriav1alpha1.ScopeTemplateList
	if err := r.Client.List(ctx, &templates, sel); err != nil {
		return fmt.Errorf("listing ScopeTemplates of AccessRequest %q: %w", request, err)
	}
	var si []*oriav1alpha1.ScopeInstance
	for i := range instances.Items {
		if compiledFor(&instances.Items[i]) {
			si = append(si, &instances.Items[i])
		}
	}
	var st []*oriav1alpha1.ScopeTemplate
	for i := range templates.Items {
		if compiledFor(&templates.Items[i]) {
			st = append(st, &templates.Items[i])
		}
	}
	if len(si)+len(st) == 0 {
		return nil
	}
	w := r.writer()
	var errs []error
	for _, o := range append(engine.Delete(ctx, w, engine.ScopeInstanceKind.Name, si), engine.Delete(ctx, w, engine.ScopeTemplateKind.Name, st)...) {
		errs = append(errs, o.Err)
	}
	return errors.Join(errs...)
}

// objectName is the name of a request's compiled objects.
func objectName(request string) string { return eligibility.ObjectName(request) }
