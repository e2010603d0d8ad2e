package admission

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/eligibility"
)

// checkAccessRequest checks a create or an update of an AccessRequest, for
// every requester, admins included (the two-person rule holds for them
// too): eligibility.AdmitCreate and AdmitUpdate, pure, on the request's
// policy as the API server has it now and the requester as it
// authenticated them (name and groups). The only question asked of the API
// server about the requester is whether they may do everything, and only
// when they end a request they neither made nor may approve.
func (g *Guard) checkAccessRequest(ctx context.Context, user authenticationv1.UserInfo, old client.Object, r *oriav1alpha1.AccessRequest) ([]string, error) {
	p, err := g.policyOf(ctx, r.Spec.PolicyName)
	if err != nil {
		return nil, err
	}
	u := eligibility.User{Name: user.Username, Groups: user.Groups}
	if old == nil {
		return eligibility.AdmitCreate(p, r, u), nil
	}
	before := old.(*oriav1alpha1.AccessRequest)
	admin := false
	if eligibility.End.Of(before.Annotations) != eligibility.End.Of(r.Annotations) && user.Username != before.Spec.Requester &&
		(p == nil || !eligibility.Approver(p, u)) {
		if admin, err = g.authz.Unrestricted(ctx, user); err != nil {
			return nil, err
		}
	}
	return eligibility.AdmitUpdate(p, before, r, u, admin, time.Now()), nil
}

// policyOf reads the named RBACPolicy from the API server; nil when there
// is none.
func (g *Guard) policyOf(ctx context.Context, name string) (*oriav1alpha1.RBACPolicy, error) {
	p := &oriav1alpha1.RBACPolicy{}
	if err := g.reader.Get(ctx, client.ObjectKey{Name: name}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading RBACPolicy %q: %w", name, err)
	}
	return p, nil
}
