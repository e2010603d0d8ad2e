package main

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/operator-framework/oria/hack/reproducible"
)

// krewAPIVersion and the types below are krew's plugin manifest
// (sigs.k8s.io/krew/pkg/index, v1alpha2), the fields oria's uses; json tags
// to read it (sigs.k8s.io/yaml), yaml tags to write it in this order.
const krewAPIVersion = "krew.googlecontainertools.github.com/v1alpha2"

type krewPlugin struct {
	APIVersion string       `json:"apiVersion" yaml:"apiVersion"`
	Kind       string       `json:"kind" yaml:"kind"`
	Metadata   krewMetadata `json:"metadata" yaml:"metadata"`
	Spec       krewSpec     `json:"spec" yaml:"spec"`
}

type krewMetadata struct {
	Name string `json:"name" yaml:"name"`
}

type krewSpec struct {
	Version          string         `json:"version" yaml:"version"`
	Homepage         string         `json:"homepage" yaml:"homepage"`
	ShortDescription string         `json:"shortDescription" yaml:"shortDescription"`
	Description      string         `json:"description" yaml:"description"`
	Caveats          string         `json:"caveats,omitempty" yaml:"caveats,omitempty"`
	Platforms        []krewPlatform `json:"platforms" yaml:"platforms"`
}

type krewPlatform struct {
	Selector krewSelector `json:"selector" yaml:"selector"`
	URI      string       `json:"uri" yaml:"uri"`
	Sha256   string       `json:"sha256" yaml:"sha256"`
	Bin      string       `json:"bin" yaml:"bin"`
	Files    []krewFile   `json:"files" yaml:"files"`
}

type krewSelector struct {
	MatchLabels map[string]string `json:"matchLabels" yaml:"matchLabels"`
}

type krewFile struct {
	From string `json:"from" yaml:"from"`
	To   string `json:"to" yaml:"to"`
}

// pluginName is the plugin's name in krew (`kubectl krew install oria`),
// and its manifest is plugins/<pluginName>.yaml.
const pluginName = "oria"

// checkVersion accepts what krew accepts as a plugin version and a release
// is tagged with: v followed by a semantic version (v0.1.0, v1.2.3-rc.1).
func checkVersion(v string) error {
	rest, ok := strings.CutPrefix(v, "v")
	if !ok {
		return fmt.Errorf("version %q: want vX.Y.Z", v)
	}
	if _, err := version.ParseSemantic(rest); err != nil {
		return fmt.Errorf("version %q: want vX.Y.Z: %w", v, err)
	}
	return nil
}

// releasedArchive is one platform's archive as the manifest names it.
type releasedArchive struct {
	Platform reproducible.Platform
	Name     string
	Sha256   string
}

// krewManifest is the plugin manifest of a release: one platform per
// archive, downloaded from url/<archive>.
func krewManifest(ver, url string, archives []releasedArchive) ([]byte, error) {
	if err := checkVersion(ver); err != nil {
		return nil, err
	}
	p := krewPlugin{
		APIVersion: krewAPIVersion,
		Kind:       "Plugin",
		Metadata:   krewMetadata{Name: pluginName},
		Spec: krewSpec{
			Version:          ver,
			Homepage:         "https://github.com/operator-framework/oria",
			ShortDescription: "Inspect and grant the RBAC of OLM v1 extensions with oria, for a time",
			Description: `Inspects oria, the RBAC add-on of OLM v1 (operator-controller): per
ClusterExtension its RBAC mode, APIs, roles and the RBACPolicies granting them,
with who granted and revoked each (status), who may use its APIs and where,
confirmed by SubjectAccessReviews (access), what a user, group or ServiceAccount
may do (can), what applying RBACPolicies would grant and whether oria's guard
admits them (plan), and whether oria's install is healthy (check). Grants
break-glass access that ends on its own, refusing a grant of nothing and waiting
until it is in force (grant), and ends it early (revoke), recording who, when
and why.
`,
			Caveats: `* oria must be installed on the cluster, from the release of the same
  version: kubectl apply --server-side -f <release>/install.yaml
* Check the install with: kubectl oria check
`,
		},
	}
	url = strings.TrimSuffix(url, "/")
	for _, a := range archives {
		p.Spec.Platforms = append(p.Spec.Platforms, krewPlatform{
			Selector: krewSelector{MatchLabels: map[string]string{"os": a.Platform.OS, "arch": a.Platform.Arch}},
			URI:      url + "/" + a.Name,
			Sha256:   a.Sha256,
			Bin:      pluginBin,
			Files:    []krewFile{{From: pluginBin, To: "."}, {From: licenseFile, To: "."}},
		})
	}
	return kyaml.Marshal(p)
}
