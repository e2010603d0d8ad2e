package installer

import (
	"fmt"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// RenderVersion is Render with every object of the install labelled
// app.kubernetes.io/version=version (oriav1alpha1.LabelVersion): its CRDs,
// its Deployment and the Deployment's pods among them, and no selector.
// `make build-installer` renders the install so (VERSION); `kubectl oria
// check` compares the label of the CRDs and of the pods with the plugin's
// version, and `kubectl oria version` prints the pods'.
func RenderVersion(root, dir, image, version string) ([]byte, error) {
	if errs := validation.IsValidLabelValue(version); len(errs) > 0 || version == "" {
		return nil, fmt.Errorf("version %q is not a label value: %s", version, strings.Join(errs, "; "))
	}
	return render(root, dir, image, version)
}

// setVersion adds the version label, templates included, to the
// kustomization in dir.
func setVersion(mem filesys.FileSystem, dir, version string) error {
	p := path.Join(dir, "kustomization.yaml")
	b, err := mem.ReadFile(p)
	if err != nil {
		return err
	}
	k := &types.Kustomization{}
	if err := yaml.Unmarshal(b, k); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	k.Labels = append(k.Labels, types.Label{Pairs: map[string]string{oriav1alpha1.LabelVersion: version}, IncludeTemplates: true})
	out, err := yaml.Marshal(k)
	if err != nil {
		return err
	}
	return mem.WriteFile(p, out)
}
