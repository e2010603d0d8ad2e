package olm

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/operator-framework/oria/internal/names"
)

// api is one CustomResourceDefinition of a bundle.
type api struct {
	plural, kind string
	cluster      bool // cluster-scoped
}

// The APIs of the test operator. Version 1.0.0 provides widgets and gadgets
// (namespaced) and fleets (cluster-scoped); 2.0.0 adds doohickeys and drops
// gadgets.
var (
	widgets    = api{plural: "widgets", kind: "Widget"}
	gadgets    = api{plural: "gadgets", kind: "Gadget"}
	fleets     = api{plural: "fleets", kind: "Fleet", cluster: true}
	doohickeys = api{plural: "doohickeys", kind: "Doohickey"}

	apisV1 = []api{widgets, gadgets, fleets}
	apisV2 = []api{widgets, fleets, doohickeys}
)

// operatorPackage is a package of the test operator: a name of its own and an
// API group of its own, so that every test installs CRDs no other test owns.
type operatorPackage struct {
	name  string // package name, also the ClusterExtension's
	group string // API group of its CRDs
}

func (p operatorPackage) crdName(a api) string { return a.plural + "." + p.group }

// bundleRoleName is the name of the ClusterRole the bundle ships: the name
// oria gives the view role of widgets, so that oria uses it instead of
// generating one.
func (p operatorPackage) bundleRoleName() string {
	return names.ExtensionRole(p.crdName(widgets), names.RoleView)
}

// bundleFiles returns the files of a registry+v1 bundle of the package at
// version with the given APIs: a ClusterServiceVersion (AllNamespaces, and
// OwnNamespace and SingleNamespace when namespaced; one Deployment with no
// replicas: no kubelet runs here), the CRDs, the bundle-provided view role
// of widgets, and metadata/annotations.yaml.
func (p operatorPackage) bundleFiles(version string, apis []api, noRole, namespaced bool) (map[string][]byte, error) {
	files := map[string][]byte{}
	add := func(path string, obj any) error {
		b, err := yaml.Marshal(obj)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		files[path] = b
		return nil
	}
	owned := []map[string]any{}
	for _, a := range apis {
		scope := apiextensionsv1.NamespaceScoped
		if a.cluster {
			scope = apiextensionsv1.ClusterScoped
		}
		crd := &apiextensionsv1.CustomResourceDefinition{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
			ObjectMeta: metav1.ObjectMeta{Name: p.crdName(a)},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: p.group,
				Names: apiextensionsv1.CustomResourceDefinitionNames{
					Plural: a.plural, Singular: strings.ToLower(a.kind), Kind: a.kind, ListKind: a.kind + "List",
				},
				Scope: scope,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object",
						Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"spec": {Type: "object", XPreserveUnknownFields: ptr.To(true)},
						},
					}},
				}},
			},
		}
		if err := add("manifests/"+p.crdName(a)+".crd.yaml", crd); err != nil {
			return nil, err
		}
		owned = append(owned, map[string]any{"name": p.crdName(a), "version": "v1", "kind": a.kind, "displayName": a.kind})
	}
	if !noRole {
		role := &rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: p.bundleRoleName()},
			Rules: []rbacv1.PolicyRule{{
				APIGroups: []string{p.group}, Resources: []string{widgets.plural}, Verbs: []string{"get", "list", "watch"},
			}},
		}
		if err := add("manifests/"+p.bundleRoleName()+".clusterrole.yaml", role); err != nil {
			return nil, err
		}
	}
	sa := p.name + "-operator"
	csv := map[string]any{
		"apiVersion": "operators.coreos.com/v1alpha1",
		"kind":       "ClusterServiceVersion",
		"metadata": map[string]any{
			"name":        p.name + ".v" + version,
			"annotations": map[string]any{"capabilities": "Basic Install"},
		},
		"spec": map[string]any{
			"displayName": "oria e2e operator " + p.name,
			"version":     version,
			"installModes": []map[string]any{
				{"type": "OwnNamespace", "supported": namespaced},
				{"type": "SingleNamespace", "supported": namespaced},
				{"type": "MultiNamespace", "supported": false},
				{"type": "AllNamespaces", "supported": true},
			},
			"customresourcedefinitions": map[string]any{"owned": owned},
			"install": map[string]any{
				"strategy": "deployment",
				"spec": map[string]any{
					"clusterPermissions": []map[string]any{{
						"serviceAccountName": sa,
						"rules": []map[string]any{
							{"apiGroups": []string{p.group}, "resources": []string{"*"}, "verbs": []string{"*"}},
						},
					}},
					"deployments": []map[string]any{{
						"name": p.name + "-operator",
						"spec": map[string]any{
							// No kubelet runs here: no replicas, so the
							// Deployment is complete at once and stays
							// unchanged.
							"replicas": 0,
							"selector": map[string]any{"matchLabels": map[string]any{"app": p.name}},
							"template": map[string]any{
								"metadata": map[string]any{"labels": map[string]any{"app": p.name}},
								"spec": map[string]any{
									"serviceAccountName": sa,
									"containers": []map[string]any{{
										"name": "manager", "image": "example.com/oria-e2e/operator:v" + version,
									}},
								},
							},
						},
					}},
				},
			},
		},
	}
	if err := add("manifests/"+p.name+".clusterserviceversion.yaml", csv); err != nil {
		return nil, err
	}
	if err := add("metadata/annotations.yaml", map[string]any{"annotations": bundleLabels(p.name)}); err != nil {
		return nil, err
	}
	return files, nil
}

func bundleLabels(pkg string) map[string]string {
	return map[string]string{
		"operators.operatorframework.io.bundle.mediatype.v1":       "registry+v1",
		"operators.operatorframework.io.bundle.manifests.v1":       "manifests/",
		"operators.operatorframework.io.bundle.metadata.v1":        "metadata/",
		"operators.operatorframework.io.bundle.package.v1":         pkg,
		"operators.operatorframework.io.bundle.channels.v1":        "stable",
		"operators.operatorframework.io.bundle.channel.default.v1": "stable",
	}
}

// release is one version of a package in a catalog.
type release struct {
	version string
	apis    []api
	// noBundleRole leaves the bundle's ClusterRole out.
	noBundleRole bool
	// namespaced also supports the OwnNamespace and SingleNamespace install
	// modes.
	namespaced bool
}

// publish builds the bundle images of releases and a File-Based Catalog
// image listing them in channel "stable" (each release replaces the one
// before), pushes them to the suite's registry, and returns the catalog
// image's reference.
func (p operatorPackage) publish(ctx context.Context, releases ...release) (string, error) {
	docs := []string{fmt.Sprintf("schema: olm.package\nname: %s\ndefaultChannel: stable", p.name)}
	var entries []string
	for i, r := range releases {
		files, err := p.bundleFiles(r.version, r.apis, r.noBundleRole, r.namespaced)
		if err != nil {
			return "", err
		}
		ref := fmt.Sprintf("%s/%s/bundle:v%s", registryHost, p.name, r.version)
		if err := push(ctx, ref, files, bundleLabels(p.name)); err != nil {
			return "", err
		}
		entry := fmt.Sprintf("  - name: %s.v%s", p.name, r.version)
		if i > 0 {
			entry += fmt.Sprintf("\n    replaces: %s.v%s", p.name, releases[i-1].version)
		}
		entries = append(entries, entry)
		docs = append(docs, fmt.Sprintf(`schema: olm.bundle
name: %s.v%s
package: %s
image: %s
properties:
  - type: olm.package
    value:
      packageName: %s
      version: %s`, p.name, r.version, p.name, ref, p.name, r.version))
	}
	docs = append(docs, fmt.Sprintf("schema: olm.channel\nname: stable\npackage: %s\nentries:\n%s", p.name, strings.Join(entries, "\n")))
	ref := fmt.Sprintf("%s/%s/catalog:latest", registryHost, p.name)
	err := push(ctx, ref, map[string][]byte{"configs/" + p.name + "/catalog.yaml": []byte(strings.Join(docs, "\n---\n") + "\n")},
		map[string]string{"operators.operatorframework.io.index.configs.v1": "/configs"})
	return ref, err
}

// push builds a one-layer image of files with the given config labels and
// pushes it to ref, trusting the suite's CA.
func push(ctx context.Context, ref string, files map[string][]byte, labels map[string]string) error {
	img, err := crane.Image(files)
	if err != nil {
		return err
	}
	if img, err = mutate.Config(img, v1.Config{Labels: labels}); err != nil {
		return err
	}
	tag, err := name.ParseReference(ref)
	if err != nil {
		return err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = pki.clientTLS()
	if err := remote.Write(tag, img, remote.WithContext(ctx), remote.WithTransport(tr)); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}
