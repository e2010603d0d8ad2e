package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// refNameAnnotation names the index inside an OCI layout
// (`skopeo copy --all oci:dist/image:v0.1.0 docker://...`).
const refNameAnnotation = "org.opencontainers.image.ref.name"

// writeLayout writes idx as an OCI image layout at dir: index.json names the
// multi-platform index (tagged tag), the blobs hold it, its images, their
// configs and layers. A layout already at dir is replaced; any other
// non-empty directory is refused.
func writeLayout(dir string, idx v1.ImageIndex, tag string) error {
	if err := clearLayout(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("writing OCI layout %s: %w", dir, err)
	}
	var opts []layout.Option
	if tag != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{refNameAnnotation: tag}))
	}
	if err := p.AppendIndex(idx, opts...); err != nil {
		return fmt.Errorf("writing OCI layout %s: %w", dir, err)
	}
	return nil
}

// clearLayout removes dir if it is an OCI layout (it has an oci-layout
// file) or empty, so that a build never leaves another build's blobs.
func clearLayout(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
			return fmt.Errorf("%s is not empty and not an OCI layout: not replacing it", dir)
		}
	}
	return os.RemoveAll(dir)
}

// registryRef parses img as a reference to push to: ok is false when img
// names no registry (its first path element has no "." or ":" and is not
// "localhost", as Docker reads it: `oria:latest`), which is then only
// built, not pushed.
func registryRef(img string) (ref name.Reference, ok bool, err error) {
	first, _, hasSlash := strings.Cut(img, "/")
	if !hasSlash || (!strings.ContainsAny(first, ".:") && first != "localhost") {
		return nil, false, nil
	}
	ref, err = name.ParseReference(img) // a bare repository means :latest
	if err != nil {
		return nil, false, fmt.Errorf("IMG=%s: %w", img, err)
	}
	return ref, true, nil
}

// pinnedRef is the reference a manifest pins the image by: the repository
// of img when img names a registry, else fallback, at digest.
func pinnedRef(img, fallback string, digest v1.Hash) (string, error) {
	ref, ok, err := registryRef(img)
	if err != nil {
		return "", err
	}
	repo := fallback
	if ok {
		repo = ref.Context().Name()
	}
	if _, err := name.NewRepository(repo); err != nil {
		return "", fmt.Errorf("repository %q: %w", repo, err)
	}
	return repo + "@" + digest.String(), nil
}

// push writes idx and every image it holds to ref's registry, with the
// credentials of ~/.docker/config.json (or credential helpers), as
// `docker push` would.
func push(ctx context.Context, ref name.Reference, idx v1.ImageIndex, opts ...remote.Option) error {
	opts = append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	if err := remote.WriteIndex(ref, idx, opts...); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}
