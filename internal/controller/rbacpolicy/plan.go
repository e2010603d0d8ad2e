package rbacpolicy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/bundlerole"
	"github.com/operator-framework/oria/internal/lookup"
	"github.com/operator-framework/oria/internal/olm"
	policymodel "github.com/operator-framework/oria/internal/policy"
)

// decision is what a reconcile does with a policy's compiled objects.
type decision int

const (
	// decisionKeep leaves the compiled objects as they are: a spec error
	// the admin must fix, or an extension whose mode annotation is invalid
	// (a typo never revokes access by surprise).
	decisionKeep decision = iota
	// decisionRevoke removes them: the policy grants nothing now.
	decisionRevoke
	// decisionApply writes them and mirrors the ScopeInstance.
	decisionApply
)

// plan is what one reconcile of a policy read and decided.
type plan struct {
	decision decision
	// reason and message explain a keep or revoke decision (the Ready
	// condition's reason and message).
	reason, message string
	// compiled is the policy compiled against its extension's APIs
	// (decisionApply, and APINotFound revocations).
	compiled policymodel.Compiled
	// clusterScoped are the covered APIs that are cluster-scoped, for a
	// policy that grants in namespaces (where RoleBindings cannot reach
	// them).
	clusterScoped []string
	// withheld says why bundle-provided roles the policy would bind are not
	// bound: they reach beyond their extension (package bundlerole).
	withheld []string
	// scopesPending is set when discovery does not know a covered API yet
	// (its CRD was just created): look again soon.
	scopesPending bool
}

// Gather validates the policy, reads its extension and that extension's
// APIs from the cache, and decides.
func (r *Reconciler) Gather(ctx context.Context, policy *oriav1alpha1.RBACPolicy) (*plan, error) {
	keep := func(reason, msg string) (*plan, error) {
		return &plan{decision: decisionKeep, reason: reason, message: msg}, nil
	}
	revoke := func(reason, msg string) (*plan, error) {
		return &plan{decision: decisionRevoke, reason: reason, message: msg}, nil
	}
	// Spec errors are terminal and leave existing grants as they are: the
	// admin fixes the policy, and a typo never revokes access by surprise.
	if problems := policymodel.ValidateSubjects(policy.Spec.Subjects); len(problems) > 0 {
		return keep(oriav1alpha1.ReasonInvalidSubject, strings.Join(problems, "; "))
	}
	if policy.Spec.NamespaceSelector != nil {
		if _, err := metav1.LabelSelectorAsSelector(policy.Spec.NamespaceSelector); err != nil {
			return keep(oriav1alpha1.ReasonInvalidSelector, fmt.Sprintf("spec.namespaceSelector: %v", err))
		}
	}
	ext := &ocv1.ClusterExtension{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: policy.Spec.ExtensionName}, ext); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("getting ClusterExtension %q: %w", policy.Spec.ExtensionName, err)
		}
		return revoke(oriav1alpha1.ReasonExtensionNotFound,
			fmt.Sprintf("ClusterExtension %q does not exist; access is granted once it is installed", policy.Spec.ExtensionName))
	}
	mode, valid := oriav1alpha1.EffectiveRBACMode(ext.Annotations, r.DefaultMode)
	switch {
	case !valid:
		return keep(oriav1alpha1.ReasonInvalidMode,
			fmt.Sprintf("ClusterExtension %q has an invalid %s annotation %q (Legacy, FineGrained or Unmanaged, case-sensitive); the grants in force are left unchanged until it is fixed",
				ext.Name, oriav1alpha1.AnnotationRBACMode, ext.Annotations[oriav1alpha1.AnnotationRBACMode]))
	case mode == oriav1alpha1.RBACModeUnmanaged:
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
	tooBroad, err := r.tooBroadBundleRoles(ctx, ext.Name, crds, p.compiled.Roles)
	if err != nil {
		return nil, err
	}
	apis := p.compiled.APIs
	if p.withheld = p.compiled.Withhold(tooBroad); len(apis) > 0 && p.compiled.Template == nil {
		p.decision, p.reason = decisionRevoke, oriav1alpha1.ReasonBundleRoleTooBroad
		p.message = "every ClusterRole this policy would bind is withheld: " + strings.Join(p.withheld, "; ")
		return p, nil
	}
	namespaced := len(policy.Spec.Namespaces) > 0 || policy.Spec.NamespaceSelector != nil
	if namespaced && r.APIScopes != nil && len(p.compiled.APIs) > 0 {
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

// tooBroadBundleRoles returns the bundle-provided roles among roles (the
// ones the policy binds) that reach beyond the extension, with why. The
// rules are read from the API server only when the extension's bundle
// provides one of those roles (the bundle-role cache, metadata only, says
// so); usually it provides none.
func (r *Reconciler) tooBroadBundleRoles(ctx context.Context, ext string, crds, roles []string) (map[string]string, error) {
	if len(roles) == 0 {
		return nil, nil
	}
	owned := client.MatchingLabels(olm.OwnerLabels(ext))
	if r.BundleRoles != nil {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("ClusterRoleList"))
		if err := r.BundleRoles.List(ctx, list, owned); err != nil {
			return nil, fmt.Errorf("listing the bundle-provided ClusterRoles of ClusterExtension %q: %w", ext, err)
		}
		if !slices.ContainsFunc(list.Items, func(m metav1.PartialObjectMetadata) bool { return slices.Contains(roles, m.Name) }) {
			return nil, nil
		}
	}
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	var full rbacv1.ClusterRoleList
	if err := reader.List(ctx, &full, owned); err != nil {
		return nil, fmt.Errorf("reading the bundle-provided ClusterRoles of ClusterExtension %q: %w", ext, err)
	}
	return bundlerole.TooBroad(ext, crds, full.Items), nil
}
