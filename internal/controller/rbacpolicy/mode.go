package rbacpolicy

import (
	"context"
	"fmt"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// An invalid mode annotation on a ClusterExtension (a typo: "legacy") is one
// mistake, reported once: on the ClusterExtension (RBACManaged=False,
// InvalidMode, and one Warning event when it appears). Its policies keep the
// grant in force and say so without an event each:
//
//   - a policy whose grant in force is exactly what its spec compiles to is
//     applied as it is (nothing changes) and says Bound, noting the
//     annotation (modeNote);
//   - one whose spec asks for something else (edited meanwhile, or never
//     granted) is narrowed (Narrow: nothing the spec adds is granted) and
//     says InvalidMode, with no Warning of its own (warnable);
//   - an expired one says Expired: its window is over, the mode does not
//     matter (computeStatus).

// invalidMode decides for a policy of an extension whose mode annotation is
// invalid, with p compiled against the extension's APIs. A spec error is
// narrowed as ever.
func (r *Reconciler) invalidMode(ctx context.Context, policy *oriav1alpha1.RBACPolicy, p *plan, ext *ocv1.ClusterExtension, specBad bool) (*plan, error) {
	msg := fmt.Sprintf("ClusterExtension %q has an invalid %s annotation %q (Legacy, FineGrained or Unmanaged, case-sensitive; its %s condition says so)",
		ext.Name, oriav1alpha1.AnnotationRBACMode, ext.Annotations[oriav1alpha1.AnnotationRBACMode], oriav1alpha1.TypeRBACManaged)
	if !specBad && p.compiled.Template != nil {
		tmpl, inst, err := r.inForce(ctx, policy)
		if err != nil {
			return nil, err
		}
		if tmpl != nil && inst != nil && equality.Semantic.DeepEqual(tmpl.Spec, p.compiled.Template.Spec) &&
			equality.Semantic.DeepEqual(inst.Spec, p.compiled.Instance.Spec) {
			// What is in force is what the spec asks: applying it
			// changes nothing.
			p.modeNote = msg + "; the grant in force stays as it is, and a change of this policy waits until the annotation is fixed"
			return p, nil
		}
	}
	return r.narrow(ctx, policy, p, oriav1alpha1.ReasonInvalidMode,
		msg+"; the grants in force are kept, as far as the policy still allows them, until it is fixed")
}

// warnable returns the conditions of a policy that WarnOnTransition judges:
// none while it says InvalidMode, which its ClusterExtension warns about once
// for all of its policies.
func warnable(o *oriav1alpha1.RBACPolicy) []metav1.Condition {
	if c := meta.FindStatusCondition(o.Status.Conditions, oriav1alpha1.TypeReady); c != nil && c.Reason == oriav1alpha1.ReasonInvalidMode {
		return nil
	}
	return o.Status.Conditions
}
