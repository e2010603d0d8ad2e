package main

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/operator-framework/oria/hack/reproducible"
)

// TestBuiltImage builds oria's image as `make image` does (run: both
// platforms, real binaries, the OCI layout, a push to a registry served on
// loopback, the printed reference) and checks what it reads back from the
// layout and from the registry by digest: each image's config, its binary
// (static, the platform's machine, CGO off, -trimpath, the version
// stamped); then that a second build gives the same digest.
func TestBuiltImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds oria for linux/amd64 and linux/arm64")
	}
	ctx := t.Context()
	c := config{
		Root:    filepath.Join("..", ".."), // the module's root, from hack/image
		Package: "./cmd/oria",
		Meta:    testMeta(),
	}
	c.Meta.Version = "v0.0.0-image-test"
	c.LDFlags = "-s -w -X main.version=" + c.Meta.Version
	t.Setenv("SOURCE_DATE_EPOCH", strconv.FormatInt(c.Meta.Created.Unix(), 10))
	host := loopbackRegistry(t)
	dir := filepath.Join(t.TempDir(), "image")
	var stdout, stderr bytes.Buffer
	start := time.Now()
	err := run(ctx, c, target{Platforms: "linux/amd64,linux/arm64", Img: host + "/oria:" + c.Meta.Version, Repo: "unused.example.com/oria", Out: dir}, &stdout, &stderr)
	require.NoError(t, err, "%s", stderr.String())
	t.Logf("first build: %s\n%s", time.Since(start).Round(time.Second), stderr.String())

	pinned, err := name.NewDigest(strings.TrimSpace(stdout.String()))
	require.NoError(t, err, "run prints <repository>@<digest>")
	assert.Equal(t, host+"/oria", pinned.Context().Name(), "the repository of IMG")
	fromDisk := readLayout(t, dir)
	require.Equal(t, pinned.DigestStr(), digestOf(t, fromDisk).String(), "the layout holds the printed digest")
	checkImages(t, fromDisk, c.Meta.Version)

	pulled := pull(ctx, t, pinned)
	assert.Equal(t, digestOf(t, fromDisk), digestOf(t, pulled), "pulled back by digest")
	tagged, err := remote.Index(pinned.Context().Tag(c.Meta.Version), remote.WithContext(ctx))
	require.NoError(t, err)
	assert.Equal(t, digestOf(t, fromDisk), digestOf(t, tagged), "IMG's tag names the index")

	start = time.Now()
	c.Platforms = []reproducible.Platform{amd64, arm64}
	again, err := build(ctx, c, t.TempDir())
	require.NoError(t, err)
	t.Logf("second build: %s, index %s", time.Since(start).Round(time.Second), digestOf(t, again))
	assert.Equal(t, digestOf(t, fromDisk), digestOf(t, again), "two builds of the same sources give the same digest")
}

func readLayout(t *testing.T, dir string) v1.ImageIndex {
	t.Helper()
	p, err := layout.FromPath(dir)
	require.NoError(t, err)
	root, err := p.ImageIndex()
	require.NoError(t, err)
	rm, err := root.IndexManifest()
	require.NoError(t, err)
	require.Len(t, rm.Manifests, 1)
	idx, err := root.ImageIndex(rm.Manifests[0].Digest)
	require.NoError(t, err)
	return idx
}

// machines is the ELF machine of each architecture the index holds.
var machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkImages checks each platform's image as a container runtime reads it.
func checkImages(t *testing.T, idx v1.ImageIndex, version string) {
	t.Helper()
	im, err := idx.IndexManifest()
	require.NoError(t, err)
	require.Len(t, im.Manifests, 2)
	for _, desc := range im.Manifests {
		p := desc.Platform
		img, err := idx.Image(desc.Digest)
		require.NoError(t, err)
		cf, err := img.ConfigFile()
		require.NoError(t, err)
		assert.Equal(t, p.OS, cf.OS, "%s: config os", p)
		assert.Equal(t, p.Architecture, cf.Architecture, "%s: config architecture", p)
		assert.Equal(t, []string{"/oria"}, cf.Config.Entrypoint, "%s", p)
		assert.Equal(t, "65532:65532", cf.Config.User, "%s", p)
		layers, err := img.Layers()
		require.NoError(t, err)
		require.Len(t, layers, 1)
		hdrs, files := readLayer(t, layers[0])
		require.Len(t, hdrs, 1, "%s: one file", p)
		assert.Equal(t, "oria", hdrs[0].Name)
		assert.Equal(t, int64(0o755), hdrs[0].Mode)
		bin := files["oria"]
		checkStatic(t, p, bin)
		checkBuildInfo(t, p, bin, version)
		if p.OS == runtime.GOOS && p.Architecture == runtime.GOARCH {
			checkRuns(t, bin, version)
		}
	}
}

// checkStatic: an ELF executable for the platform's machine with no
// interpreter (no PT_INTERP, no .interp) and no shared libraries.
func checkStatic(t *testing.T, p *v1.Platform, bin []byte) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(bin))
	require.NoError(t, err, "%s: an ELF file", p)
	defer f.Close()
	assert.Equal(t, elf.ET_EXEC, f.Type, "%s: an executable", p)
	assert.Equal(t, machines[p.Architecture], f.Machine, "%s: machine", p)
	for _, prog := range f.Progs {
		assert.NotEqual(t, elf.PT_INTERP, prog.Type, "%s: a program interpreter: not static", p)
		assert.NotEqual(t, elf.PT_DYNAMIC, prog.Type, "%s: dynamic linking information", p)
	}
	assert.Nil(t, f.Section(".interp"), "%s: an .interp section", p)
	libs, err := f.ImportedLibraries()
	require.NoError(t, err)
	assert.Empty(t, libs, "%s: shared libraries", p)
}

// checkBuildInfo: what the Go toolchain recorded: oria's main package, CGO
// off, -trimpath, the platform, the version stamped, no VCS stamp.
func checkBuildInfo(t *testing.T, p *v1.Platform, bin []byte, version string) {
	t.Helper()
	bi, err := buildinfo.Read(bytes.NewReader(bin))
	require.NoError(t, err, "%s: build info", p)
	assert.Equal(t, "github.com/operator-framework/oria/cmd/oria", bi.Path)
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
		assert.False(t, strings.HasPrefix(s.Key, "vcs."), "%s: %s=%s: built with -buildvcs=false, the revision is a label", p, s.Key, s.Value)
	}
	assert.Equal(t, "0", settings["CGO_ENABLED"], "%s", p)
	assert.Equal(t, "true", settings["-trimpath"], "%s", p)
	assert.Equal(t, p.OS, settings["GOOS"])
	assert.Equal(t, p.Architecture, settings["GOARCH"])
	// -trimpath keeps -ldflags out of the build info (they may hold paths,
	// go.dev/issue/52372): the stamped version is looked for in the binary's
	// data, and checkRuns asks the binary of the test's platform for it.
	assert.True(t, bytes.Contains(bin, []byte(version)), "%s: the version %s stamped", p, version)
	assert.Equal(t, runtime.Version(), bi.GoVersion)
}

// checkRuns runs the binary of the test's own platform: it prints the
// stamped version.
func checkRuns(t *testing.T, bin []byte, version string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "oria")
	require.NoError(t, os.WriteFile(path, bin, 0o755))
	out, err := exec.Command(path, "--version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), version)
}

// loopbackRegistry serves go-containerregistry's registry on 127.0.0.1
// (plain HTTP, which go-containerregistry uses for loopback) and returns its
// host:port.
func loopbackRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	require.True(t, strings.HasPrefix(host, "127.0.0.1:"), "a loopback registry: %s", srv.URL)
	return host
}

// pull reads the index at ref from its registry, and each image of it by
// digest, with every layer's blob (checked against its digest).
func pull(ctx context.Context, t *testing.T, ref name.Digest) v1.ImageIndex {
	t.Helper()
	pulled, err := remote.Index(ref, remote.WithContext(ctx))
	require.NoError(t, err)
	im, err := pulled.IndexManifest()
	require.NoError(t, err)
	require.Len(t, im.Manifests, 2)
	for _, desc := range im.Manifests {
		img, err := remote.Image(ref.Context().Digest(desc.Digest.String()), remote.WithContext(ctx))
		require.NoError(t, err)
		assert.Equal(t, desc.Digest, digestOf(t, img), "%s pulled by digest", desc.Platform)
		layers, err := img.Layers()
		require.NoError(t, err)
		for _, l := range layers {
			rc, err := l.Compressed() // verifies the blob against its digest
			require.NoError(t, err)
			_, err = io.Copy(io.Discard, rc)
			require.NoError(t, err, "%s: layer blob", desc.Platform)
			require.NoError(t, rc.Close())
		}
	}
	return pulled
}
