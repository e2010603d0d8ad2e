package cli

import (
	"context"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/authz"
	"github.com/operator-framework/oria/internal/subjects"
)

// Identity is who a SubjectAccessReview asks about (subjects.Identity: a
// user name and its groups).
type Identity = subjects.Identity

// Authenticated is the group every authenticated user belongs to; the
// reverse lookup adds it to a user's groups, as kubectl's --as does.
const Authenticated = subjects.Authenticated

// SubjectIdentity is the identity a binding's subject stands for
// (subjects.IdentityOf).
func SubjectIdentity(s rbacv1.Subject) (Identity, error) { return subjects.IdentityOf(s) }

// UserIdentity is the identity of the reverse lookup (subjects.UserIdentity).
func UserIdentity(user string, groups []string) Identity { return subjects.UserIdentity(user, groups) }

// Authorizer answers whether an identity may do something: the API
// server's SubjectAccessReview (SARAuthorizer), or a fake in tests.
type Authorizer interface {
	Allowed(ctx context.Context, id Identity, attrs authorizationv1.ResourceAttributes) (bool, error)
}

// SARAuthorizer asks the API server with SubjectAccessReviews (authz.Ask,
// the same question oria's guard and controllers ask).
type SARAuthorizer struct {
	Client client.Client
}

// Allowed implements Authorizer.
func (a SARAuthorizer) Allowed(ctx context.Context, id Identity, attrs authorizationv1.ResourceAttributes) (bool, error) {
	return authz.Ask(ctx, a.Client, id.UserInfo(), authz.Permission{Verb: attrs.Verb, Group: attrs.Group, Resource: attrs.Resource,
		Subresource: attrs.Subresource, Name: attrs.Name, Namespace: attrs.Namespace})
}
