package main

import (
	"bytes"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/operator-framework/oria/hack/reproducible"
)

const (
	// binaryPath is where the image holds oria, and its entrypoint.
	binaryPath = "/oria"
	// user is the image's numeric user and group: config/manager runs the
	// pod with runAsNonRoot and runAsUser/runAsGroup 65532, as the
	// Dockerfile's USER. (No /etc/passwd is needed for a numeric user.)
	user = "65532:65532"
)

// OCI annotation keys the image config's labels use
// (https://github.com/opencontainers/image-spec/blob/main/annotations.md).
const (
	labelSource   = "org.opencontainers.image.source"
	labelVersion  = "org.opencontainers.image.version"
	labelRevision = "org.opencontainers.image.revision"
	labelCreated  = "org.opencontainers.image.created"
	labelTitle    = "org.opencontainers.image.title"
	labelLicenses = "org.opencontainers.image.licenses"
)

// meta is what an image says about itself besides its binary.
type meta struct {
	Source, Version, Revision string
	// Created is every timestamp of the image (config, history, the
	// layer's files): the source date, never the build's time.
	Created time.Time
}

func (m meta) labels() map[string]string {
	return map[string]string{
		labelSource:   m.Source,
		labelVersion:  m.Version,
		labelRevision: m.Revision,
		labelCreated:  m.Created.UTC().Format(time.RFC3339),
		labelTitle:    "oria",
		labelLicenses: "Apache-2.0",
	}
}

// layer is the image's one layer: the binary at binaryPath, mode 0755,
// owned by root (the user runs it, cannot change it), gzip-compressed
// deterministically.
func layer(binary []byte, m meta) (v1.Layer, error) {
	t, err := reproducible.Tar([]reproducible.File{{Name: binaryPath[1:], Mode: 0o755, Data: binary}}, m.Created)
	if err != nil {
		return nil, err
	}
	z, err := reproducible.Gzip(t)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(z)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// image is oria's image for one platform: empty.Image, the binary's layer,
// and a config with the entrypoint, the user, the platform and the OCI
// labels; OCI media types throughout.
func image(binary []byte, p reproducible.Platform, m meta) (v1.Image, error) {
	l, err := layer(binary, m)
	if err != nil {
		return nil, fmt.Errorf("layer for %s: %w", p, err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, l)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	created := v1.Time{Time: m.Created.UTC()}
	cf.Created = created
	cf.OS = p.OS
	cf.Architecture = p.Arch
	cf.Config = v1.Config{
		Entrypoint: []string{binaryPath},
		User:       user,
		WorkingDir: "/",
		Labels:     m.labels(),
	}
	// mutate.AppendLayers leaves an empty history entry for the layer.
	cf.History = []v1.History{{Created: created, CreatedBy: "hack/image: " + binaryPath, Comment: "oria " + m.Version}}
	return mutate.ConfigFile(img, cf)
}

// index is the multi-platform image: one image per platform, in the
// order given, each descriptor naming its platform.
func index(binaries map[reproducible.Platform][]byte, platforms []reproducible.Platform, m meta) (v1.ImageIndex, error) {
	adds := make([]mutate.IndexAddendum, 0, len(platforms))
	for _, p := range platforms {
		b, ok := binaries[p]
		if !ok {
			return nil, fmt.Errorf("no binary for %s", p)
		}
		img, err := image(b, p, m)
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.IndexAddendum{
			Add:        imageDescriptor{img},
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Arch}},
		})
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...), nil
}

// imageDescriptor is an image whose index descriptor has no artifactType:
// go-containerregistry would set it to the config's media type, which
// image-spec reserves for artifacts; image indexes as docker buildx writes
// them have none.
type imageDescriptor struct{ v1.Image }

func (imageDescriptor) ArtifactType() (string, error) { return "", nil }
