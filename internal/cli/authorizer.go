package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Identity is who a SubjectAccessReview asks about: a user name and the
// groups it belongs to (either may be empty, not both).
type Identity struct {
	User   string
	Groups []string
}

// SubjectIdentity is the identity a binding's subject stands for: a User
// or a Group as such, a ServiceAccount as its user name with its groups.
func SubjectIdentity(s rbacv1.Subject) (Identity, error) {
	switch s.Kind {
	case rbacv1.UserKind:
		return Identity{User: s.Name}, nil
	case rbacv1.GroupKind:
		return Identity{Groups: []string{s.Name}}, nil
	case rbacv1.ServiceAccountKind:
		return Identity{User: serviceaccount.MakeUsername(s.Namespace, s.Name), Groups: serviceaccount.MakeGroupNames(s.Namespace)}, nil
	}
	return Identity{}, fmt.Errorf("unknown subject kind %q", s.Kind)
}

// Authenticated is the group every authenticated user belongs to; the
// reverse lookup adds it to a user's groups, as kubectl's --as does.
const Authenticated = "system:authenticated"

// UserIdentity is the identity of the reverse lookup: user (a ServiceAccount
// user name gets its ServiceAccount groups), the given groups, and
// system:authenticated when there is a user.
func UserIdentity(user string, groups []string) Identity {
	id := Identity{User: user, Groups: slices.Clone(groups)}
	if ns, _, err := serviceaccount.SplitUsername(user); err == nil {
		id.Groups = append(id.Groups, serviceaccount.MakeGroupNames(ns)...)
	}
	if user != "" {
		id.Groups = append(id.Groups, Authenticated)
	}
	slices.Sort(id.Groups)
	id.Groups = slices.Compact(id.Groups)
	return id
}

// Names reports whether the binding subject s names this identity: its
// user, one of its groups, or its ServiceAccount.
func (id Identity) Names(s rbacv1.Subject) bool {
	switch s.Kind {
	case rbacv1.UserKind:
		return id.User != "" && s.Name == id.User
	case rbacv1.GroupKind:
		return slices.Contains(id.Groups, s.Name)
	case rbacv1.ServiceAccountKind:
		return id.User != "" && serviceaccount.MakeUsername(s.Namespace, s.Name) == id.User
	}
	return false
}

// String writes the identity as "User alice, Group developers".
func (id Identity) String() string {
	var parts []string
	if id.User != "" {
		parts = append(parts, "User "+id.User)
	}
	for _, g := range id.Groups {
		parts = append(parts, "Group "+g)
	}
	return strings.Join(parts, ", ")
}

// Authorizer answers whether an identity may do something: the API
// server's SubjectAccessReview (SARAuthorizer), or a fake in tests.
type Authorizer interface {
	Allowed(ctx context.Context, id Identity, attrs authorizationv1.ResourceAttributes) (bool, error)
}

// SARAuthorizer asks the API server with SubjectAccessReviews.
type SARAuthorizer struct {
	Client client.Client
}

// Allowed implements Authorizer.
func (a SARAuthorizer) Allowed(ctx context.Context, id Identity, attrs authorizationv1.ResourceAttributes) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: &attrs, User: id.User, Groups: id.Groups,
	}}
	if err := a.Client.Create(ctx, sar); err != nil {
		return false, fmt.Errorf("SubjectAccessReview for %s: %w", id, err)
	}
	return sar.Status.Allowed, nil
}
