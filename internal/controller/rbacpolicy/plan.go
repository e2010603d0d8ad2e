package rbacpolicy

import (
	"context"
	"fmt"
	"strings"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/lookup"
	"github.com/operator-framework/oria/internal/olm"
	"github.com/operator-framework/oria/internal/ownership"
	policymodel "github.com/operator-framework/oria/internal/policy"
)

// decision is what a reconcile does with a policy's compiled objects.
type decision int

const (
	// decisionRevoke removes them: the policy grants nothing now.
	decisionRevoke decision = iota
	// decisionApply writes them and mirrors the ScopeInstance.
	decisionApply
	// decisionNarrow keeps of them what the current spec still allows
	// (policy.Narrow): the spec has an error, or the extension's mode
	// annotation is invalid. A typo never revokes access by surprise, and
	// an admin's narrowing always lands.
	decisionNarrow
)

// plan is what one reconcile of a policy read and decided.
type plan struct {
	decision decision
	// reason and message explain a revoke or narrow decision (the Ready
	// condition's reason and message).
	reason, message string
	// compiled is the policy compiled against its extension's APIs, less
	// the roles it may not bind (decisionApply, and APINotFound
	// revocations).
	compiled policymodel.Compiled
	// narrowed is what a decisionNarrow keeps.
	narrowed policymodel.Narrowed
	// clusterScoped are the covered APIs that are cluster-scoped, for a
	// policy that grants in namespaces (where RoleBindings cannot reach
	// them).
	clusterScoped []string
	// The roles the policy would bind that are withheld (roles.go), each
	// with why: tooBroad are bundle-provided roles that reach beyond their
	// extension (package bundlerole); foreign are roles under a generated
	// name that are neither oria's nor the bundle's (a Conflict); pending
	// are roles that do not exist yet, or oria's roles that someone changed
	// and the extension controller is restoring.
	tooBroad, foreign, pending []string
	// scopesPending is set when discovery does not know a covered API yet
	// (its CRD was just created): look again soon.
	scopesPending bool
	// now is the instant the policy's window was judged at, for its
	// status; window is the policy's window as compiled (whole seconds),
	// phase where now lies in it. The compiled ScopeInstance carries the
	// window and judges it for the bindings.
	now    time.Time
	window binding.Window
	phase  binding.Phase
	// modeNote is set when the extension's mode annotation is invalid and
	// the grant in force is what the spec compiles to (invalidMode): the
	// policy is applied as it is, and its Ready message says so.
	modeNote string
}

// Gather judges the policy's window at this instant, for its status, and
// decides what to do with its compiled objects (gather).
func (r *Reconciler) Gather(ctx context.Context, policy *oriav1alpha1.RBACPolicy) (*plan, error) {
	now := r.now()
	var p *plan
	var err error
	if w := binding.PolicyWindow(policy.Spec); policy.Spec.Eligibility != nil {
		p = eligible(policy)
	} else if w.Empty() {
		p = neverOpens(w.Whole())
	} else {
		p, err = r.gather(ctx, policy)
	}
	if p != nil {
		p.now, p.window = now, binding.PolicyWindow(policy.Spec).Whole()
		p.phase, _ = p.window.At(now)
	}
	return p, err
}

// neverOpens is the plan of a policy whose window is empty in whole
// seconds (w, as compiled): a window inside one second, or one the rounding
// inverts, stored before the API server refused it. It grants nothing at
// any instant, so nothing is compiled and what was is revoked (fail
// closed: the current spec allows nothing); the policy says Pending until
// its expiresAt, then Expired (at which it looks again, windowRequeue),
// never an error retried for ever.
func neverOpens(w binding.Window) *plan {
	return &plan{decision: decisionRevoke, reason: oriav1alpha1.ReasonPending, message: fmt.Sprintf(
		"spec.notBefore and spec.expiresAt leave no whole second between them: as oria applies them (notBefore rounded up, expiresAt down) "+
			"the window is from %s until %s, so it never opens and nothing is granted; Expired from spec.expiresAt on",
		binding.Stamp(w.NotBefore), binding.Stamp(w.ExpiresAt))}
}

// eligible is the plan of a policy whose subjects are eligible rather
// than granted (spec.eligibility): it binds nothing by itself, so whatever
// it compiled before is revoked; each approved AccessRequest carries its
// own time-bound grant (package accessrequest).
func eligible(policy *oriav1alpha1.RBACPolicy) *plan {
	return &plan{decision: decisionRevoke, reason: oriav1alpha1.ReasonEligible, message: fmt.Sprintf(
		"the policy's subjects are eligible, not granted: it binds nothing by itself; each subject activates it for at most %v with an AccessRequest (kubectl oria request)",
		policy.Spec.Eligibility.MaxDuration.Duration)}
}

// gather validates the policy, reads its extension, that extension's APIs
// and the ClusterRoles it would bind, and decides (see Gather).
func (r *Reconciler) gather(ctx context.Context, policy *oriav1alpha1.RBACPolicy) (*plan, error) {
	specReason, specMsg := specError(policy)
	revoke := func(reason, msg string) (*plan, error) {
		if specReason != "" {
			reason, msg = specReason, specMsg+"; nothing is granted: "+msg
		}
		return &plan{decision: decisionRevoke, reason: reason, message: msg}, nil
	}
	ext := &ocv1.ClusterExtension{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: policy.Spec.ExtensionName}, ext); err != nil {
		if meta.IsNoMatchError(err) {
			return revoke(oriav1alpha1.ReasonOLMNotInstalled, fmt.Sprintf(
				"OLM v1 is not installed: the API server does not serve the ClusterExtension API (CRD %s); access is granted once OLM v1 and ClusterExtension %q are installed",
				olm.ClusterExtensionCRD, policy.Spec.ExtensionName))
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("getting ClusterExtension %q: %w", policy.Spec.ExtensionName, err)
		}
		return revoke(oriav1alpha1.ReasonExtensionNotFound,
			fmt.Sprintf("ClusterExtension %q does not exist; access is granted once it is installed", policy.Spec.ExtensionName))
	}
	mode, valid := oriav1alpha1.EffectiveRBACMode(ext.Annotations, r.opts.DefaultMode)
	if valid && mode == oriav1alpha1.RBACModeUnmanaged {
		// Unmanaged means nobody but what the admin set up by hand: a
		// policy's bindings would still grant bundle-provided roles, so
		// they are removed.
		return revoke(oriav1alpha1.ReasonExtensionUnmanaged,
			fmt.Sprintf("ClusterExtension %q is in Unmanaged mode, so oria grants nothing for it; annotate it with %s=FineGrained",
				ext.Name, oriav1alpha1.AnnotationRBACMode))
	}
	crds, err := lookup.ExtensionCRDs(ctx, r.Client, ext.Name)
	if err != nil {
		return nil, err
	}
	p := &plan{decision: decisionApply, compiled: policymodel.Compile(policy, crds)}
	apis := p.compiled.APIs
	if err := r.judgeRoles(ctx, ext, crds, p); err != nil {
		return nil, err
	}
	switch {
	case !valid:
		if p, err = r.invalidMode(ctx, policy, p, ext, specReason != ""); err != nil || p.decision != decisionApply {
			return p, err
		}
	case specReason != "":
		return r.narrow(ctx, policy, p, specReason, specMsg)
	}
	if len(apis) > 0 && p.compiled.Template == nil {
		p.decision, p.reason = decisionRevoke, p.withheldReason()
		p.message = "every ClusterRole this policy would bind is withheld: " + strings.Join(p.withheld(), "; ")
		return p, nil
	}
	namespaced := len(policy.Spec.Namespaces) > 0 || policy.Spec.NamespaceSelector != nil
	if namespaced && len(p.compiled.APIs) > 0 {
		var unknown []string
		if p.clusterScoped, unknown, err = r.APIScopes.ClusterScoped(p.compiled.APIs); err != nil {
			return nil, err
		}
		p.scopesPending = len(unknown) > 0
	}
	if p.compiled.Template == nil {
		p.decision, p.reason = decisionRevoke, oriav1alpha1.ReasonAPINotFound
		p.message = fmt.Sprintf("ClusterExtension %q provides no API", ext.Name)
		if len(p.compiled.Missing) > 0 {
			p.message = fmt.Sprintf("ClusterExtension %q does not provide %s", ext.Name, strings.Join(p.compiled.Missing, ", "))
		}
	}
	return p, nil
}

// specError returns the reason and message of what makes the policy's spec
// unusable as it stands ("" when nothing does). The admission guard refuses
// such writes; an object written before it did, or without it, is narrowed
// (policy.Narrow), never left granting what its spec removed.
func specError(policy *oriav1alpha1.RBACPolicy) (string, string) {
	if problems := policymodel.ValidateSubjects(policy.Spec.Subjects); len(problems) > 0 {
		return oriav1alpha1.ReasonInvalidSubject, strings.Join(problems, "; ")
	}
	if policy.Spec.NamespaceSelector != nil {
		if _, err := metav1.LabelSelectorAsSelector(policy.Spec.NamespaceSelector); err != nil {
			return oriav1alpha1.ReasonInvalidSelector, fmt.Sprintf("spec.namespaceSelector: %v", err)
		}
	}
	return "", ""
}

// narrow decides what a policy that cannot be applied as it stands keeps of
// the grant in force (its compiled objects in the cache): what the current
// spec still allows (policy.Narrow), or nothing.
func (r *Reconciler) narrow(ctx context.Context, policy *oriav1alpha1.RBACPolicy, p *plan, reason, msg string) (*plan, error) {
	p.reason, p.message = reason, msg
	tmpl, inst, err := r.inForce(ctx, policy)
	if err != nil {
		return nil, err
	}
	p.narrowed = policymodel.Narrow(policy, p.compiled.Roles, tmpl, inst)
	if p.narrowed.Template == nil {
		// Nothing in force that the current spec still allows (or nothing
		// in force at all).
		p.decision = decisionRevoke
		p.message += " (nothing is granted until the spec is valid: the current spec allows none of the grant in force)"
		return p, nil
	}
	p.decision = decisionNarrow
	return p, nil
}

// inForce returns the policy's compiled objects as the cache shows them,
// each nil when absent or not controlled by this policy (by UID).
func (r *Reconciler) inForce(ctx context.Context, policy *oriav1alpha1.RBACPolicy) (*oriav1alpha1.ScopeTemplate, *oriav1alpha1.ScopeInstance, error) {
	key := client.ObjectKey{Name: policymodel.ObjectName(policy.Name)}
	tmpl, inst := &oriav1alpha1.ScopeTemplate{}, &oriav1alpha1.ScopeInstance{}
	get := func(o client.Object) (bool, error) {
		if err := r.Client.Get(ctx, key, o); err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, fmt.Errorf("getting %T %q: %w", o, key.Name, err)
		}
		return ownership.ControlledByUID(o, policy.UID), nil
	}
	okT, err := get(tmpl)
	if err != nil {
		return nil, nil, err
	}
	okI, err := get(inst)
	if err != nil {
		return nil, nil, err
	}
	if !okT {
		tmpl = nil
	}
	if !okI {
		inst = nil
	}
	return tmpl, inst, nil
}
