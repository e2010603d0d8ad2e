// Package cli holds the logic of the kubectl oria plugin (cmd/kubectl-oria):
// what the cluster holds (Snapshot, read once), the pure report builders
// (Status, Candidates) and the access check that asks the API server's
// authorizer (Confirm, behind the Authorizer interface).
package cli

import (
	"context"
	"fmt"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/olm"
)

// Snapshot is what the plugin reads from the cluster: everything a report
// needs, read once, so that the builders are pure.
type Snapshot struct {
	Extensions          []ocv1.ClusterExtension
	CRDs                []apiextensionsv1.CustomResourceDefinition
	ClusterRoles        []rbacv1.ClusterRole
	Roles               []rbacv1.Role
	ClusterRoleBindings []rbacv1.ClusterRoleBinding
	RoleBindings        []rbacv1.RoleBinding
	Policies            []oriav1alpha1.RBACPolicy
	Templates           []oriav1alpha1.ScopeTemplate
	Instances           []oriav1alpha1.ScopeInstance
	// Requests are the AccessRequests (eligible access), for the
	// activations' requester and approver.
	Requests []oriav1alpha1.AccessRequest
	// Warnings say what could not be read (a list the user may not make)
	// and was left out of the reports.
	Warnings []string
	// Now is when the snapshot was read: the instant the windows of
	// time-bound grants are judged at.
	Now time.Time
}

// What selects the parts of a Snapshot to read.
type What struct {
	// Bindings reads Roles, RoleBindings and ClusterRoleBindings (access).
	Bindings bool
	// Namespace limits Roles and RoleBindings to one namespace ("" all).
	Namespace string
	// Extensions are the ClusterExtensions the command names: when the
	// user may not list ClusterExtensions, these are read one by one (a
	// get), and the generated roles of their APIs too when ClusterRoles
	// cannot be listed.
	Extensions []string
}

// listing is one list request of Read.
type listing struct {
	name string
	list client.ObjectList
	opts []client.ListOption
	// optional lists are left out, with a warning, when forbidden.
	optional bool
}

// Read fills a Snapshot from c. CRDs are read only when operator-controller
// labelled them as a ClusterExtension's.
func Read(ctx context.Context, c client.Reader, what What) (*Snapshot, error) {
	lists := []listing{
		{"ClusterExtensions", &ocv1.ClusterExtensionList{}, nil, false},
		{"CustomResourceDefinitions", &apiextensionsv1.CustomResourceDefinitionList{},
			[]client.ListOption{client.MatchingLabelsSelector{Selector: olm.InstalledByExtension()}}, false},
		{"ClusterRoles", &rbacv1.ClusterRoleList{}, nil, !what.Bindings},
		{"RBACPolicies", &oriav1alpha1.RBACPolicyList{}, nil, true},
		{"ScopeTemplates", &oriav1alpha1.ScopeTemplateList{}, nil, true},
		{"ScopeInstances", &oriav1alpha1.ScopeInstanceList{}, nil, true},
	}
	if what.Bindings {
		ns := client.InNamespace(what.Namespace)
		lists = append(lists,
			listing{"ClusterRoleBindings", &rbacv1.ClusterRoleBindingList{}, nil, false},
			listing{"RoleBindings", &rbacv1.RoleBindingList{}, []client.ListOption{ns}, false},
			listing{"Roles", &rbacv1.RoleList{}, []client.ListOption{ns}, false})
	}
	s := &Snapshot{Now: time.Now()}
	for _, l := range lists {
		if err := c.List(ctx, l.list, l.opts...); err != nil {
			done, ferr := s.fallback(ctx, c, l, what, err)
			if ferr != nil {
				return nil, ferr
			}
			if done {
				continue
			}
		}
		switch v := l.list.(type) {
		case *ocv1.ClusterExtensionList:
			s.Extensions = v.Items
		case *apiextensionsv1.CustomResourceDefinitionList:
			s.CRDs = v.Items
		case *rbacv1.ClusterRoleList:
			s.ClusterRoles = v.Items
		case *oriav1alpha1.RBACPolicyList:
			s.Policies = v.Items
		case *oriav1alpha1.ScopeTemplateList:
			s.Templates = v.Items
		case *oriav1alpha1.ScopeInstanceList:
			s.Instances = v.Items
		case *rbacv1.ClusterRoleBindingList:
			s.ClusterRoleBindings = v.Items
		case *rbacv1.RoleBindingList:
			s.RoleBindings = v.Items
		case *rbacv1.RoleList:
			s.Roles = v.Items
		}
	}
	// The AccessRequests only name an activation's requester and approver:
	// a user who may not list them gets the reports without, and no
	// warning.
	var requests oriav1alpha1.AccessRequestList
	switch err := c.List(ctx, &requests); {
	case err == nil:
		s.Requests = requests.Items
	case !apierrors.IsForbidden(err) && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err):
		return nil, fmt.Errorf("listing AccessRequests: %w", err)
	}
	return s, nil
}

// fallback handles a list the user may not make: ClusterExtensions named
// by the command are read one by one, so are the generated roles of their
// APIs; an optional list is left out with a warning. It reports whether
// the list was handled, or returns the error.
func (s *Snapshot) fallback(ctx context.Context, c client.Reader, l listing, what What, err error) (bool, error) {
	failed := fmt.Errorf("listing %s: %w", l.name, err)
	if !apierrors.IsForbidden(err) {
		return false, failed
	}
	switch {
	case l.name == "ClusterExtensions" && len(what.Extensions) > 0:
		for _, name := range what.Extensions {
			ce := ocv1.ClusterExtension{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, &ce); err != nil {
				if apierrors.IsNotFound(err) {
					continue // reported as not found
				}
				return false, fmt.Errorf("getting ClusterExtension %q (you may not list them): %w", name, err)
			}
			s.Extensions = append(s.Extensions, ce)
		}
		return true, nil
	case l.name == "ClusterRoles" && len(what.Extensions) > 0 && !what.Bindings:
		// (access needs every role a binding may name: no fallback.)
		for _, name := range what.Extensions {
			for _, api := range ExtensionAPIs(s.CRDs, name) {
				for _, k := range names.RoleKinds {
					cr, role := rbacv1.ClusterRole{}, names.ExtensionRole(api.CRD, k)
					if err := c.Get(ctx, client.ObjectKey{Name: role}, &cr); err == nil {
						s.ClusterRoles = append(s.ClusterRoles, cr)
					} else if !apierrors.IsNotFound(err) {
						return false, fmt.Errorf("getting ClusterRole %q (you may not list them): %w", role, err)
					}
				}
			}
		}
		return true, nil
	case l.optional:
		s.Warnings = append(s.Warnings, fmt.Sprintf("you may not list %s: the report leaves them out", l.name))
		return true, nil
	}
	return false, failed
}
