package subjects

import (
	"fmt"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
)

// Authenticated is the group the API server puts every authenticated user
// in.
const Authenticated = "system:authenticated"

// Identity is who the API server's authorizer is asked about: a user name
// and the groups it belongs to (either may be empty, not both). RBAC looks
// at nothing else.
type Identity struct {
	User   string
	Groups []string
}

// ServiceAccountUser is the user name the API server knows the
// ServiceAccount name in namespace by: "system:serviceaccount:<namespace>:<name>".
// It is the one spelling of "a ServiceAccount as a user" in oria.
func ServiceAccountUser(namespace, name string) string {
	return serviceaccount.MakeUsername(namespace, name)
}

// ServiceAccount is the identity of the ServiceAccount name in namespace as
// the API server authenticates it, by its token or when oria impersonates
// its user name: that user name, the groups system:serviceaccounts and
// system:serviceaccounts:<namespace>, and system:authenticated.
func ServiceAccount(namespace, name string) Identity {
	return Identity{User: ServiceAccountUser(namespace, name), Groups: append(serviceaccount.MakeGroupNames(namespace), Authenticated)}
}

// IdentityOf is the identity a binding's subject stands for: a User or a
// Group as such, a ServiceAccount (with its namespace) as ServiceAccount
// says.
func IdentityOf(s rbacv1.Subject) (Identity, error) {
	switch s.Kind {
	case rbacv1.UserKind:
		return Identity{User: s.Name}, nil
	case rbacv1.GroupKind:
		return Identity{Groups: []string{s.Name}}, nil
	case rbacv1.ServiceAccountKind:
		return ServiceAccount(s.Namespace, s.Name), nil
	}
	return Identity{}, fmt.Errorf("unknown subject kind %q", s.Kind)
}

// UserIdentity is the identity of user as the API server authenticates it
// (as kubectl's --as asks about it): user, a ServiceAccount's groups when
// user is a ServiceAccount's user name, groups, and system:authenticated
// when there is a user; the groups sorted, each once.
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
// user, one of its groups, or its ServiceAccount (a ServiceAccount subject
// without a namespace names nobody: see Normalize).
func (id Identity) Names(s rbacv1.Subject) bool {
	switch s.Kind {
	case rbacv1.UserKind:
		return id.User != "" && s.Name == id.User
	case rbacv1.GroupKind:
		return slices.Contains(id.Groups, s.Name)
	case rbacv1.ServiceAccountKind:
		return id.User != "" && s.Namespace != "" && ServiceAccountUser(s.Namespace, s.Name) == id.User
	}
	return false
}

// UserInfo is the identity as a SubjectAccessReview's requester.
func (id Identity) UserInfo() authenticationv1.UserInfo {
	return authenticationv1.UserInfo{Username: id.User, Groups: id.Groups}
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
