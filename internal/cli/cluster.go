// Package cli holds the logic of the kubectl oria plugin (cmd/kubectl-oria):
// what the cluster holds (Snapshot, read once), the pure report builders
// (Status, Candidates) and the access check that asks the API server's
// authorizer (Confirm, behind the Authorizer interface).
package cli

import (
	"context"
	"fmt"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
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
}

// What selects the parts of a Snapshot to read.
type What struct {
	// Bindings reads Roles, RoleBindings and ClusterRoleBindings (access).
	Bindings bool
	// Namespace limits Roles and RoleBindings to one namespace ("" all).
	Namespace string
}

// listing is one list request of Read.
type listing struct {
	name string
	list client.ObjectList
	opts []client.ListOption
}

// Read fills a Snapshot from c. CRDs are read only when operator-controller
// labelled them as a ClusterExtension's.
func Read(ctx context.Context, c client.Reader, what What) (*Snapshot, error) {
	lists := []listing{
		{"ClusterExtensions", &ocv1.ClusterExtensionList{}, nil},
		{"CustomResourceDefinitions", &apiextensionsv1.CustomResourceDefinitionList{},
			[]client.ListOption{client.HasLabels{oriav1alpha1.LabelOLMOwnerName}}},
		{"ClusterRoles", &rbacv1.ClusterRoleList{}, nil},
		{"RBACPolicies", &oriav1alpha1.RBACPolicyList{}, nil},
		{"ScopeTemplates", &oriav1alpha1.ScopeTemplateList{}, nil},
		{"ScopeInstances", &oriav1alpha1.ScopeInstanceList{}, nil},
	}
	if what.Bindings {
		ns := client.InNamespace(what.Namespace)
		lists = append(lists,
			listing{"ClusterRoleBindings", &rbacv1.ClusterRoleBindingList{}, nil},
			listing{"RoleBindings", &rbacv1.RoleBindingList{}, []client.ListOption{ns}},
			listing{"Roles", &rbacv1.RoleList{}, []client.ListOption{ns}})
	}
	s := &Snapshot{}
	for _, l := range lists {
		if err := c.List(ctx, l.list, l.opts...); err != nil {
			return nil, fmt.Errorf("listing %s: %w", l.name, err)
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
	return s, nil
}
