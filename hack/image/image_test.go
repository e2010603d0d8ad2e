package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/operator-framework/oria/hack/reproducible"
)

var (
	amd64 = reproducible.Platform{OS: "linux", Arch: "amd64"}
	arm64 = reproducible.Platform{OS: "linux", Arch: "arm64"}
)

func testMeta() meta {
	return meta{
		Source:   "https://github.com/operator-framework/oria",
		Version:  "v0.0.0-test",
		Revision: "0123456789abcdef0123456789abcdef01234567",
		Created:  time.Unix(1700000000, 0).UTC(),
	}
}

// fakeIndex is an index of two platforms whose "binaries" are short strings.
func fakeIndex(t *testing.T, m meta, bins ...string) v1.ImageIndex {
	t.Helper()
	idx, err := index(map[reproducible.Platform][]byte{amd64: []byte(bins[0]), arm64: []byte(bins[1])}, []reproducible.Platform{amd64, arm64}, m)
	require.NoError(t, err)
	return idx
}

func digestOf(t *testing.T, d interface{ Digest() (v1.Hash, error) }) v1.Hash {
	t.Helper()
	h, err := d.Digest()
	require.NoError(t, err)
	return h
}

// TestIndexIsDeterministic: the same binaries and metadata give the same
// digest; each input changes it.
func TestIndexIsDeterministic(t *testing.T) {
	base := digestOf(t, fakeIndex(t, testMeta(), "amd", "arm"))
	assert.Equal(t, base, digestOf(t, fakeIndex(t, testMeta(), "amd", "arm")), "two assemblies of the same inputs")
	later := testMeta()
	later.Created = later.Created.Add(time.Second)
	otherVersion := testMeta()
	otherVersion.Version = "v0.0.1"
	for name, d := range map[string]v1.Hash{
		"another binary":      digestOf(t, fakeIndex(t, testMeta(), "amd!", "arm")),
		"another source date": digestOf(t, fakeIndex(t, later, "amd", "arm")),
		"another version":     digestOf(t, fakeIndex(t, otherVersion, "amd", "arm")),
	} {
		assert.NotEqual(t, base, d, name)
	}
}

// TestImageConfig checks each platform's manifest and config: OCI media
// types, the platform in the descriptor and the config, the entrypoint,
// the user, the labels, the timestamps, one layer.
func TestImageConfig(t *testing.T) {
	m := testMeta()
	idx := fakeIndex(t, m, "amd", "arm")
	mt, err := idx.MediaType()
	require.NoError(t, err)
	assert.Equal(t, types.OCIImageIndex, mt)
	im, err := idx.IndexManifest()
	require.NoError(t, err)
	var platforms []string
	for _, desc := range im.Manifests {
		platforms = append(platforms, desc.Platform.String())
		assert.Equal(t, types.OCIManifestSchema1, desc.MediaType)
		assert.Empty(t, desc.ArtifactType, "an image, not an artifact")
		img, err := idx.Image(desc.Digest)
		require.NoError(t, err)
		manifest, err := img.Manifest()
		require.NoError(t, err)
		assert.Equal(t, types.OCIConfigJSON, manifest.Config.MediaType)
		require.Len(t, manifest.Layers, 1)
		assert.Equal(t, types.OCILayer, manifest.Layers[0].MediaType)
		cf, err := img.ConfigFile()
		require.NoError(t, err)
		assert.Equal(t, desc.Platform.OS, cf.OS)
		assert.Equal(t, desc.Platform.Architecture, cf.Architecture)
		assert.True(t, m.Created.Equal(cf.Created.Time), "created %s", cf.Created)
		want := v1.Config{
			Entrypoint: []string{"/oria"},
			User:       "65532:65532",
			WorkingDir: "/",
			Labels: map[string]string{
				"org.opencontainers.image.source":   m.Source,
				"org.opencontainers.image.version":  m.Version,
				"org.opencontainers.image.revision": m.Revision,
				"org.opencontainers.image.created":  "2023-11-14T22:13:20Z",
				"org.opencontainers.image.title":    "oria",
				"org.opencontainers.image.licenses": "Apache-2.0",
			},
		}
		if diff := cmp.Diff(want, cf.Config); diff != "" {
			t.Errorf("%s config (-want +got):\n%s", desc.Platform, diff)
		}
		require.Len(t, cf.History, 1)
		assert.True(t, m.Created.Equal(cf.History[0].Created.Time))
		require.Len(t, cf.RootFS.DiffIDs, 1)
	}
	assert.Equal(t, []string{"linux/amd64", "linux/arm64"}, platforms)
}

// TestLayerContent: one regular file, /oria, 0755, root-owned, at the source
// date, holding the binary.
func TestLayerContent(t *testing.T) {
	m := testMeta()
	l, err := layer([]byte("the binary"), m)
	require.NoError(t, err)
	hdrs, files := readLayer(t, l)
	want := []tar.Header{{Typeflag: tar.TypeReg, Name: "oria", Mode: 0o755, Size: 10, ModTime: m.Created, Format: tar.FormatUSTAR}}
	if diff := cmp.Diff(want, hdrs); diff != "" {
		t.Errorf("layer entries (-want +got):\n%s", diff)
	}
	assert.Equal(t, "the binary", string(files["oria"]))
}

// readLayer lists l's tar headers (the fields a build could leak into:
// name, type, mode, owner, size, time) and contents.
func readLayer(t *testing.T, l v1.Layer) ([]tar.Header, map[string][]byte) {
	t.Helper()
	rc, err := l.Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	tr := tar.NewReader(rc)
	var hdrs []tar.Header
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return hdrs, files
		}
		require.NoError(t, err)
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[h.Name] = b
		hdrs = append(hdrs, tar.Header{
			Typeflag: h.Typeflag, Name: h.Name, Mode: h.Mode, Uid: h.Uid, Gid: h.Gid,
			Uname: h.Uname, Gname: h.Gname, Size: h.Size, ModTime: h.ModTime.UTC(), Format: h.Format,
		})
	}
}

// TestLayout writes the index as an OCI layout, reads it back, and writes
// it again over the first (one index, not two); a directory that is not a
// layout is never removed.
func TestLayout(t *testing.T) {
	idx := fakeIndex(t, testMeta(), "amd", "arm")
	dir := filepath.Join(t.TempDir(), "image")
	for range 2 {
		require.NoError(t, writeLayout(dir, idx, "v0.0.0-test"))
		p, err := layout.FromPath(dir)
		require.NoError(t, err)
		root, err := p.ImageIndex()
		require.NoError(t, err)
		rm, err := root.IndexManifest()
		require.NoError(t, err)
		require.Len(t, rm.Manifests, 1, "index.json names the multi-platform index once")
		assert.Equal(t, types.OCIImageIndex, rm.Manifests[0].MediaType)
		assert.Equal(t, digestOf(t, idx), rm.Manifests[0].Digest)
		assert.Equal(t, "v0.0.0-test", rm.Manifests[0].Annotations[refNameAnnotation])
		back, err := root.ImageIndex(rm.Manifests[0].Digest)
		require.NoError(t, err)
		assert.Equal(t, digestOf(t, idx), digestOf(t, back))
	}

	other := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(other, "keep"), []byte("x"), 0o644))
	assert.Error(t, writeLayout(other, idx, ""))
	assert.FileExists(t, filepath.Join(other, "keep"))
}

func TestRegistryRef(t *testing.T) {
	digest := v1.Hash{Algorithm: "sha256", Hex: "0000000000000000000000000000000000000000000000000000000000000001"}
	const fallback = "ghcr.io/operator-framework/oria"
	for _, tc := range []struct {
		img, push, pinned string
	}{
		{img: "", pinned: fallback + "@" + digest.String()},
		{img: "oria:latest", pinned: fallback + "@" + digest.String()},
		{img: "someone/oria:v1", pinned: fallback + "@" + digest.String()},
		{img: "registry.example.com/oria:v0.1.0", push: "registry.example.com/oria:v0.1.0", pinned: "registry.example.com/oria@" + digest.String()},
		{img: "registry.example.com/team/oria", push: "registry.example.com/team/oria:latest", pinned: "registry.example.com/team/oria@" + digest.String()},
		{img: "127.0.0.1:5000/oria:v1", push: "127.0.0.1:5000/oria:v1", pinned: "127.0.0.1:5000/oria@" + digest.String()},
		{img: "localhost/oria:v1", push: "localhost/oria:v1", pinned: "localhost/oria@" + digest.String()},
	} {
		t.Run(tc.img, func(t *testing.T) {
			ref, ok, err := registryRef(tc.img)
			require.NoError(t, err)
			assert.Equal(t, tc.push != "", ok, "pushed")
			if ok {
				assert.Equal(t, tc.push, ref.Name())
			}
			pinned, err := pinnedRef(tc.img, fallback, digest)
			require.NoError(t, err)
			assert.Equal(t, tc.pinned, pinned)
		})
	}
	_, _, err := registryRef("registry.example.com/Oria:v1")
	assert.Error(t, err, "an invalid reference")
}
