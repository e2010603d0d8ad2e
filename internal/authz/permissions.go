package authz

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// Permission is one access a SubjectAccessReview can ask about: a verb on a
// resource (optionally a subresource and a name) in a namespace or
// cluster-wide, or a verb on a non-resource URL.
type Permission struct {
	Verb        string
	Group       string
	Resource    string
	Subresource string
	Name        string
	// Namespace is "" for cluster-wide (every namespace, and cluster-scoped
	// resources).
	Namespace string
	// NonResourceURL is set for a non-resource permission (then only Verb
	// counts).
	NonResourceURL string
}

// String reads like the API server's own escalation message: "get secrets",
// "create clusterrolebindings.rbac.authorization.k8s.io", `get configmaps
// "cfg"`, "get pods/log", "get non-resource URL /metrics".
func (p Permission) String() string {
	if p.NonResourceURL != "" {
		return p.Verb + " non-resource URL " + p.NonResourceURL
	}
	res := p.Resource
	if p.Subresource != "" {
		res += "/" + p.Subresource
	}
	if p.Group != "" {
		res += "." + p.Group
	}
	s := p.Verb + " " + res
	if p.Name != "" {
		s += fmt.Sprintf(" %q", p.Name)
	}
	return s
}

// bindPermission is "bind" on the ClusterRole named role (every ClusterRole
// when role is "") in namespace ("" cluster-wide): what Kubernetes requires
// to create a binding to a role whose permissions one does not hold.
func bindPermission(role, namespace string) Permission {
	return Permission{Verb: "bind", Group: rbacv1.GroupName, Resource: "clusterroles", Name: role, Namespace: namespace}
}

// escalatePermission is "escalate" on the ClusterRole named role (every
// ClusterRole when role is ""): what Kubernetes requires to write a role
// with permissions one does not hold.
func escalatePermission(role string) Permission {
	return Permission{Verb: "escalate", Group: rbacv1.GroupName, Resource: "clusterroles", Name: role}
}

// Expand returns every permission that rules grant when bound in namespace
// ("" cluster-wide), one per group × resource × verb × resource name,
// sorted and without duplicates. Wildcards stay literal ("*"): a
// SubjectAccessReview for verb "*" is allowed only by a rule that grants
// "*", which is exactly "holds this permission". Non-resource URLs are
// granted only by cluster-wide bindings, so a namespace gets none.
func Expand(rules []rbacv1.PolicyRule, namespace string) []Permission {
	var out []Permission
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			if namespace != "" {
				continue
			}
			for _, u := range r.NonResourceURLs {
				for _, v := range r.Verbs {
					out = append(out, Permission{Verb: v, NonResourceURL: u})
				}
			}
			continue
		}
		resourceNames := r.ResourceNames
		if len(resourceNames) == 0 {
			resourceNames = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				resource, sub, _ := strings.Cut(res, "/")
				for _, v := range r.Verbs {
					for _, n := range resourceNames {
						out = append(out, Permission{Verb: v, Group: g, Resource: resource, Subresource: sub, Name: n, Namespace: namespace})
					}
				}
			}
		}
	}
	slices.SortFunc(out, comparePermissions)
	return slices.Compact(out)
}

func comparePermissions(a, b Permission) int {
	return cmp.Or(
		cmp.Compare(a.Namespace, b.Namespace),
		cmp.Compare(a.NonResourceURL, b.NonResourceURL),
		cmp.Compare(a.Group, b.Group),
		cmp.Compare(a.Resource, b.Resource),
		cmp.Compare(a.Subresource, b.Subresource),
		cmp.Compare(a.Name, b.Name),
		cmp.Compare(a.Verb, b.Verb),
	)
}

// SubjectAccessReview returns the review that asks whether user holds p.
func SubjectAccessReview(user authenticationv1.UserInfo, p Permission) *authorizationv1.SubjectAccessReview {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   user.Username,
		Groups: user.Groups,
		UID:    user.UID,
	}}
	if len(user.Extra) > 0 {
		sar.Spec.Extra = make(map[string]authorizationv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			sar.Spec.Extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	if p.NonResourceURL != "" {
		sar.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: p.NonResourceURL, Verb: p.Verb}
		return sar
	}
	sar.Spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
		Namespace: p.Namespace, Verb: p.Verb, Group: p.Group, Resource: p.Resource, Subresource: p.Subresource, Name: p.Name,
	}
	return sar
}
