package lookup

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// Cache indexes shared by the ScopeTemplate and ScopeInstance controllers
// (and the admission guard, which asks the same questions). The bindings of
// an instance have an index of their own (IndexInstanceBindings).
const (
	// IndexScopeTemplateName indexes ScopeInstances by
	// spec.scopeTemplateName: the instances of a template.
	IndexScopeTemplateName = "spec.scopeTemplateName"
	// IndexScopeTemplateRole indexes ScopeTemplates by the names of the
	// ClusterRoles they reference: the templates to look at again when one
	// of those roles appears or goes.
	IndexScopeTemplateRole = "spec.clusterRoles.name"
	// IndexExtensionRoles indexes oria's ClusterRoles by the value of their
	// extension label: the roles generated for an extension, without
	// matching the labels of every cached role (docs/benchmarks.md,
	// History, 3cff0f6).
	IndexExtensionRoles = "oria.extensionRoles"
	// IndexNamespaces indexes ScopeInstances by each of spec.namespaces: the
	// instances that list a namespace.
	IndexNamespaces = "spec.namespaces"
	// IndexNamespaceSelector indexes the ScopeInstances that have a
	// spec.namespaceSelector, under HasSelector: the only instances a
	// namespace's labels can concern, without the many that list their
	// namespaces (every RBACPolicy's) or are cluster-wide.
	IndexNamespaceSelector = "oria.namespaceSelector"
	// IndexPublicationNamespace indexes ScopeInstances by
	// spec.publication.configMap.namespace: the instances that publish into
	// a namespace, which its creation lets publish.
	IndexPublicationNamespace = "spec.publication.configMap.namespace"
	// IndexPolicyExtension indexes RBACPolicies by spec.extensionName, to
	// find the policies of an extension when it or what it installed
	// changes.
	IndexPolicyExtension = "spec.extensionName"
)

// HasSelector is the one value of IndexNamespaceSelector.
const HasSelector = "true"

// SetupIndexes registers every index the controllers use on indexer (a
// manager's field indexer), once per manager, at setup (as kueue's
// indexer.Setup): controller.SetupAll and the test managers call it before
// any controller, so no controller registers one of its own.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	for _, ix := range []struct {
		obj   client.Object
		field string
		fn    client.IndexerFunc
	}{
		{&oriav1alpha1.ScopeInstance{}, IndexScopeTemplateName, func(o client.Object) []string {
			return []string{o.(*oriav1alpha1.ScopeInstance).Spec.ScopeTemplateName}
		}},
		{&oriav1alpha1.ScopeTemplate{}, IndexScopeTemplateRole, func(o client.Object) []string {
			var out []string
			for _, r := range o.(*oriav1alpha1.ScopeTemplate).Spec.ClusterRoles {
				if r.Name != "" && len(r.Rules) == 0 {
					out = append(out, r.Name)
				}
			}
			return out
		}},
		{&oriav1alpha1.RBACPolicy{}, IndexPolicyExtension, func(o client.Object) []string {
			return []string{o.(*oriav1alpha1.RBACPolicy).Spec.ExtensionName}
		}},
		{&oriav1alpha1.ScopeInstance{}, IndexNamespaces, func(o client.Object) []string {
			return o.(*oriav1alpha1.ScopeInstance).Spec.Namespaces
		}},
		{&oriav1alpha1.ScopeInstance{}, IndexNamespaceSelector, func(o client.Object) []string {
			if o.(*oriav1alpha1.ScopeInstance).Spec.NamespaceSelector != nil {
				return []string{HasSelector}
			}
			return nil
		}},
		{&oriav1alpha1.ScopeInstance{}, IndexPublicationNamespace, func(o client.Object) []string {
			if pub := o.(*oriav1alpha1.ScopeInstance).Spec.Publication; pub != nil {
				return []string{pub.ConfigMap.Namespace}
			}
			return nil
		}},
		{&rbacv1.ClusterRole{}, IndexExtensionRoles, func(o client.Object) []string {
			if v, ok := o.GetLabels()[oriav1alpha1.LabelExtension]; ok {
				return []string{v}
			}
			return nil
		}},
	} {
		if err := indexer.IndexField(ctx, ix.obj, ix.field, ix.fn); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", ix.obj, ix.field, err)
		}
	}
	return nil
}
