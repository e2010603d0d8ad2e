// Package installer renders oria's kustomize bases (config/) with
// sigs.k8s.io/kustomize, as `kustomize build` would, with only Go: `make
// build-installer` (through hack/kustomize) and the install tests
// (test/install) share it, so that the tests check the file users apply.
package installer

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/pkg/util"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// ImageName is the name oria's image has in config/manager (its `images`
// entry): the name `kustomize edit set image oria=...` and Render's image
// replace.
const ImageName = "oria"

// DefaultDir is the kustomization of a complete install (CRDs, RBAC,
// Deployment, PodDisruptionBudget, webhook; oria makes the webhook's
// certificate, no cert-manager).
const DefaultDir = "config/default"

// Render builds the kustomization dir (relative to root, e.g. DefaultDir)
// and returns its YAML stream. A non-empty image ("registry/oria:v1",
// "registry/oria@sha256:...") replaces oria's, as `kustomize edit set image
// oria=<image>` would in every kustomization naming it, but in memory: the
// tree is not changed.
func Render(root, dir, image string) ([]byte, error) {
	return render(root, dir, image, "")
}

// render is Render, with every object labelled with version when it is set
// (RenderVersion).
func render(root, dir, image, version string) ([]byte, error) {
	mem := filesys.MakeFsInMemory()
	if err := copyTree(mem, root, "config"); err != nil {
		return nil, err
	}
	if image != "" {
		if err := setImage(mem, "/config", image); err != nil {
			return nil, err
		}
	}
	if version != "" {
		if err := setVersion(mem, path.Join("/", filepath.ToSlash(dir)), version); err != nil {
			return nil, err
		}
	}
	opts := krusty.MakeDefaultOptions()
	// `kustomize build`'s default: Namespaces and CRDs first, webhook
	// configurations last, so that `kubectl apply -f` of the stream works
	// in one pass.
	opts.Reorder = krusty.ReorderOptionLegacy
	k := krusty.MakeKustomizer(opts)
	m, err := k.Run(mem, path.Join("/", filepath.ToSlash(dir)))
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	return m.AsYaml()
}

// copyTree copies root/sub into mem at /sub.
func copyTree(mem filesys.FileSystem, root, sub string) error {
	return filepath.WalkDir(filepath.Join(root, sub), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		dst := "/" + filepath.ToSlash(rel)
		if d.IsDir() {
			return mem.MkdirAll(dst)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile(dst, b)
	})
}

// setImage points every `images` entry named ImageName under dir at image.
func setImage(mem filesys.FileSystem, dir, image string) error {
	name, tag, digest := util.SplitImageName(image)
	if name == "" {
		return fmt.Errorf("invalid image %q", image)
	}
	found := false
	err := mem.Walk(dir, func(p string, info fs.FileInfo, err error) error {
		if err != nil || info.IsDir() || path.Base(p) != "kustomization.yaml" {
			return err
		}
		b, err := mem.ReadFile(p)
		if err != nil {
			return err
		}
		k := &types.Kustomization{}
		if err := yaml.Unmarshal(b, k); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		changed := false
		for i := range k.Images {
			if k.Images[i].Name == ImageName {
				k.Images[i] = types.Image{Name: ImageName, NewName: name, NewTag: tag, Digest: digest}
				changed = true
			}
		}
		if !changed {
			return nil
		}
		found = true
		out, err := yaml.Marshal(k)
		if err != nil {
			return err
		}
		return mem.WriteFile(p, out)
	})
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("no kustomization under %s has an images entry named %q", dir, ImageName)
	}
	return nil
}
