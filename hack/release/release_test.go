package main

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/operator-framework/oria/hack/reproducible"
)

var (
	linuxAmd64  = reproducible.Platform{OS: "linux", Arch: "amd64"}
	linuxArm64  = reproducible.Platform{OS: "linux", Arch: "arm64"}
	darwinAmd64 = reproducible.Platform{OS: "darwin", Arch: "amd64"}
	darwinArm64 = reproducible.Platform{OS: "darwin", Arch: "arm64"}
)

// fakeBinary is an executable header for p (an ELF or Mach-O header with
// no sections), what verify reads the platform from, then a marker.
func fakeBinary(t *testing.T, p reproducible.Platform) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch p.OS {
	case "linux":
		h := elf.Header64{Type: uint16(elf.ET_EXEC), Version: uint32(elf.EV_CURRENT), Ehsize: 64, Phentsize: 56, Shentsize: 64}
		copy(h.Ident[:], elf.ELFMAG)
		h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
		h.Machine = uint16(map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[p.Arch])
		require.NoError(t, binary.Write(&buf, binary.LittleEndian, h))
	case "darwin":
		h := macho.FileHeader{Magic: macho.Magic64, Type: macho.TypeExec, Cpu: map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[p.Arch]}
		require.NoError(t, binary.Write(&buf, binary.LittleEndian, h))
		buf.Write(make([]byte, 4)) // the 64-bit header's reserved word
	}
	buf.WriteString("kubectl-oria for " + p.String())
	return buf.Bytes()
}

func testRelease() release {
	return release{
		Version:   "v0.1.0",
		URL:       "https://example.com/oria/releases/download/v0.1.0",
		Platforms: []reproducible.Platform{linuxAmd64, linuxArm64, darwinAmd64, darwinArm64},
		License:   []byte("the license\n"),
		Date:      time.Unix(1700000000, 0).UTC(),
	}
}

func fakeBinaries(t *testing.T, r release) map[reproducible.Platform][]byte {
	t.Helper()
	out := map[reproducible.Platform][]byte{}
	for _, p := range r.Platforms {
		out[p] = fakeBinary(t, p)
	}
	return out
}

// TestRelease writes a release of four platforms and checks, by reading
// the files directly, that the krew manifest and the checksum files agree
// with the archives; verify agrees; a second run writes the same bytes.
func TestRelease(t *testing.T) {
	r := testRelease()
	dir := t.TempDir()
	_, err := r.write(dir, fakeBinaries(t, r))
	require.NoError(t, err)
	require.NoError(t, verify(dir, r))

	var m map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "plugins", "oria.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &m))
	assert.Equal(t, "krew.googlecontainertools.github.com/v1alpha2", m["apiVersion"])
	assert.Equal(t, "Plugin", m["kind"])
	spec := m["spec"].(map[string]any)
	assert.Equal(t, "v0.1.0", spec["version"])
	platforms := spec["platforms"].([]any)
	require.Len(t, platforms, 4)
	for _, pl := range platforms {
		p := pl.(map[string]any)
		labels := p["selector"].(map[string]any)["matchLabels"].(map[string]any)
		name := path.Base(p["uri"].(string))
		assert.Equal(t, "kubectl-oria_v0.1.0_"+labels["os"].(string)+"_"+labels["arch"].(string)+".tar.gz", name)
		assert.Equal(t, r.URL+"/"+name, p["uri"])
		a, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		sum := sha256.Sum256(a)
		assert.Equal(t, hex.EncodeToString(sum[:]), p["sha256"], "%s: manifest sha256", name)
		line, err := os.ReadFile(filepath.Join(dir, name+".sha256"))
		require.NoError(t, err)
		assert.Equal(t, hex.EncodeToString(sum[:])+"  "+name+"\n", string(line), "%s.sha256 (sha256sum -c)", name)
		assert.Equal(t, "kubectl-oria", p["bin"])
		files, _, err := readArchive(a)
		require.NoError(t, err)
		assert.Equal(t, r.License, files["LICENSE"])
		assert.Contains(t, string(files["kubectl-oria"]), "kubectl-oria for "+labels["os"].(string)+"/"+labels["arch"].(string))
	}

	again := t.TempDir()
	_, err = r.write(again, fakeBinaries(t, r))
	require.NoError(t, err)
	for _, f := range []string{"plugins/oria.yaml", "kubectl-oria_v0.1.0_darwin_arm64.tar.gz", "kubectl-oria_v0.1.0_linux_amd64.tar.gz.sha256"} {
		a, err := os.ReadFile(filepath.Join(dir, f))
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(again, f))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(a, b), "%s: two runs write the same bytes", f)
	}
}

// TestVerifyRefuses breaks a written release in each way verify must see.
func TestVerifyRefuses(t *testing.T) {
	const amd = "kubectl-oria_v0.1.0_linux_amd64.tar.gz"
	for _, tc := range []struct {
		name    string
		corrupt func(t *testing.T, dir string, r *release)
		want    string
	}{
		{"an archive changed", func(t *testing.T, dir string, _ *release) {
			appendTo(t, filepath.Join(dir, amd), "x")
		}, "manifest sha256"},
		{"a checksum file changed", func(t *testing.T, dir string, _ *release) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, amd+".sha256"), []byte(strings.Repeat("0", 64)+"  "+amd+"\n"), 0o644))
		}, ".sha256 holds"},
		{"a stray archive", func(t *testing.T, dir string, _ *release) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "kubectl-oria_v0.0.9_linux_amd64.tar.gz"), nil, 0o644))
		}, "does not name"},
		{"another release URL", func(_ *testing.T, _ string, r *release) {
			r.URL = "https://example.com/other"
		}, "uri"},
		{"another LICENSE", func(_ *testing.T, _ string, r *release) {
			r.License = []byte("another")
		}, "LICENSE differs"},
		{"a platform missing", func(_ *testing.T, _ string, r *release) {
			r.Platforms = append(r.Platforms, reproducible.Platform{OS: "windows", Arch: "amd64"})
		}, "manifest platforms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := testRelease()
			dir := t.TempDir()
			_, err := r.write(dir, fakeBinaries(t, r))
			require.NoError(t, err)
			tc.corrupt(t, dir, &r)
			err = verify(dir, r)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	t.Run("a binary of another platform", func(t *testing.T) {
		r := testRelease()
		bins := fakeBinaries(t, r)
		bins[linuxAmd64], bins[darwinArm64] = bins[darwinArm64], bins[linuxAmd64]
		dir := t.TempDir()
		_, err := r.write(dir, bins)
		require.NoError(t, err)
		err = verify(dir, r)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "kubectl-oria is built for darwin/arm64")
		assert.Contains(t, err.Error(), "kubectl-oria is built for linux/amd64")
	})
}

func appendTo(t *testing.T, file, s string) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(s)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// TestKrewManifest pins the manifest's shape for one platform.
func TestKrewManifest(t *testing.T) {
	b, err := krewManifest("v1.2.3", "https://example.com/dl/", []releasedArchive{{Platform: darwinArm64, Name: "kubectl-oria_v1.2.3_darwin_arm64.tar.gz", Sha256: "abc"}})
	require.NoError(t, err)
	var got krewPlugin
	require.NoError(t, yaml.UnmarshalStrict(b, &got))
	want := []krewPlatform{{
		Selector: krewSelector{MatchLabels: map[string]string{"os": "darwin", "arch": "arm64"}},
		URI:      "https://example.com/dl/kubectl-oria_v1.2.3_darwin_arm64.tar.gz",
		Sha256:   "abc",
		Bin:      "kubectl-oria",
		Files:    []krewFile{{From: "kubectl-oria", To: "."}, {From: "LICENSE", To: "."}},
	}}
	if diff := cmp.Diff(want, got.Spec.Platforms); diff != "" {
		t.Errorf("platforms (-want +got):\n%s", diff)
	}
	assert.Equal(t, "oria", got.Metadata.Name)
	assert.NotEmpty(t, got.Spec.ShortDescription)
	assert.Contains(t, got.Spec.Caveats, "kubectl oria check")
}

func TestCheckVersion(t *testing.T) {
	for v, ok := range map[string]bool{
		"v0.1.0": true, "v1.2.3-rc.1": true, "v1.2.3+build.5": true,
		"0.1.0": false, "v0.1": false, "dev": false, "": false, "90efb9f-dirty": false, "v0.1.0-dirty": true,
	} {
		assert.Equal(t, ok, checkVersion(v) == nil, "%q", v)
	}
}

func TestBinaryPlatform(t *testing.T) {
	for _, p := range testRelease().Platforms {
		got, err := binaryPlatform(fakeBinary(t, p))
		require.NoError(t, err)
		assert.Equal(t, p, got)
	}
	_, err := binaryPlatform([]byte("#!/bin/sh\n"))
	assert.Error(t, err)
}
