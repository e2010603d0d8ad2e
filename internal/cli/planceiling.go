package cli

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// The ceiling (spec.serviceAccount): oria writes an instance's bindings
// impersonating its ServiceAccount, and the API server refuses those the
// ServiceAccount could not write itself. plan asks the API server the same
// question: a server-side dry run of each binding it would create or
// update, as that ServiceAccount. A binding refused is listed as REFUSED,
// not as to create.

// Impersonator hands out clients acting as a ServiceAccount
// (impersonate.Clients).
type Impersonator interface {
	For(namespace, name string) (client.Client, error)
}

// plannedOwnerUID is the UID the ceiling's dry runs give an owner that
// does not exist yet (never stored: the writes are dry runs).
const plannedOwnerUID = types.UID("00000000-0000-0000-0000-000000000000")

// ceilingCheck is a binding a ceiling writes: the change, the object as
// oria writes it, and whether it exists (an update).
type ceilingCheck struct {
	sa     oriav1alpha1.ServiceAccountReference
	change Change
	obj    client.Object
	update bool
}

// askCeiling records that the ceiling of the bindings being diffed (if
// any) must admit w, created (have nil) or updated from have.
func (p *planner) askCeiling(c Change, w, have client.Object) {
	if p.ceiling == nil {
		return
	}
	obj := w.DeepCopyObject().(client.Object)
	// The owner of a binding to create may itself be only planned (a
	// ScopeInstance the file or the grant creates), with no UID yet: the
	// API server refuses an ownerReference without one, whatever the
	// ServiceAccount may do. The dry run names a stand-in UID.
	refs := obj.GetOwnerReferences()
	for i := range refs {
		if refs[i].UID == "" {
			refs[i].UID = plannedOwnerUID
		}
	}
	obj.SetOwnerReferences(refs)
	if have != nil {
		if hRef, _ := bindingOf(have); hRef.Name != c.Role {
			return // a roleRef cannot be updated: oria replaces the binding
		}
		obj.SetResourceVersion(have.GetResourceVersion())
		obj.SetUID(have.GetUID())
	}
	p.checks = append(p.checks, ceilingCheck{sa: *p.ceiling, change: c, obj: obj, update: have != nil})
}

// checkCeilings asks, for each check, the API server whether its
// ServiceAccount may write the binding (a dry run as it), and marks the
// changes it refuses as Refused, with a note. A ServiceAccount the
// requester may not impersonate is not asked: a note says so.
func checkCeilings(ctx context.Context, c client.Client, imp Impersonator, report *PlanReport, checks []ceilingCheck) {
	asked := map[oriav1alpha1.ServiceAccountReference]client.Client{}
	unknown := map[oriav1alpha1.ServiceAccountReference]int{}
	var order []oriav1alpha1.ServiceAccountReference
	for _, ch := range checks {
		sa := ch.sa
		as, seen := asked[sa]
		if !seen {
			order = append(order, sa)
			as = mayImpersonate(ctx, c, imp, sa)
			asked[sa] = as
		}
		if as == nil {
			unknown[sa]++
			continue
		}
		obj := ch.obj.DeepCopyObject().(client.Object)
		var err error
		if ch.update {
			err = as.Update(ctx, obj, client.DryRunAll)
		} else {
			err = as.Create(ctx, obj, client.DryRunAll)
		}
		if err == nil {
			continue
		}
		if apierrors.IsNotFound(err) {
			// The role it binds does not exist yet (a template's inline
			// role, made once an instance uses it): asked again once it is.
			report.Notes = append(report.Notes, fmt.Sprintf("%s: whether ServiceAccount %s/%s (spec.serviceAccount) may %s %s %s/%s is unknown "+
				"until ClusterRole %s exists: %v", ch.change.Owner, sa.Namespace, sa.Name, verbOf(ch.update), ch.change.Kind,
				ch.change.Namespace, ch.change.Name, ch.change.Role, err))
			continue
		}
		for i := range report.Changes {
			if c := &report.Changes[i]; !c.Refused && changeKey(*c) == changeKey(ch.change) {
				c.Refused = true
				break
			}
		}
		msg := err.Error()
		if !apierrors.IsForbidden(err) {
			msg = "the dry run failed: " + msg
		}
		report.Notes = append(report.Notes, fmt.Sprintf("%s: %s %s/%s is written as ServiceAccount %s/%s (spec.serviceAccount), which may not %s it: %s",
			ch.change.Owner, ch.change.Kind, ch.change.Namespace, ch.change.Name, sa.Namespace, sa.Name, verbOf(ch.update), strings.TrimSpace(msg)))
	}
	why := "which you may not impersonate"
	if imp == nil {
		why = "which plan does not ask"
	}
	for _, sa := range order {
		if n := unknown[sa]; n > 0 {
			report.Notes = append(report.Notes, fmt.Sprintf("%d bindings are written as ServiceAccount %s/%s (spec.serviceAccount), %s: "+
				"whether it may write them is unknown (those it may not are not written)", n, sa.Namespace, sa.Name, why))
		}
	}
}

func verbOf(update bool) string {
	if update {
		return "update"
	}
	return "create"
}

// mayImpersonate returns a client acting as sa when the requester may
// impersonate it (a SelfSubjectAccessReview), else nil.
func mayImpersonate(ctx context.Context, c client.Client, imp Impersonator, sa oriav1alpha1.ServiceAccountReference) client.Client {
	if imp == nil {
		return nil
	}
	r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
		Namespace: sa.Namespace, Verb: "impersonate", Resource: "serviceaccounts", Name: sa.Name}}}
	if err := c.Create(ctx, r); err != nil || !r.Status.Allowed {
		return nil
	}
	as, err := imp.For(sa.Namespace, sa.Name)
	if err != nil {
		return nil
	}
	return as
}
