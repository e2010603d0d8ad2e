package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"debug/macho"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/operator-framework/oria/hack/reproducible"
)

// verify reads a written release back and checks that it is what r
// describes: the krew manifest names one archive per platform, each at
// r.URL/<archive>, with the sha256 of the file in dir and of its .sha256
// file; each archive holds exactly the plugin's binary (executable, built
// for the platform its selector names) and the LICENSE; no other plugin
// archive lies in dir.
func verify(dir string, r release) error {
	b, err := os.ReadFile(manifestPath(dir))
	if err != nil {
		return err
	}
	var m krewPlugin
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		return fmt.Errorf("%s: %w", manifestPath(dir), err)
	}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if m.APIVersion != krewAPIVersion || m.Kind != "Plugin" || m.Metadata.Name != pluginName {
		fail("manifest is %s %s %q, want %s Plugin %q", m.APIVersion, m.Kind, m.Metadata.Name, krewAPIVersion, pluginName)
	}
	if m.Spec.Version != r.Version {
		fail("manifest version %q, want %q", m.Spec.Version, r.Version)
	}
	if m.Spec.ShortDescription == "" || strings.ContainsAny(m.Spec.ShortDescription, "\r\n") {
		fail("krew wants a short description of one line, not %q", m.Spec.ShortDescription)
	}
	var seen []reproducible.Platform
	named := map[string]bool{}
	for _, p := range m.Spec.Platforms {
		pl := reproducible.Platform{OS: p.Selector.MatchLabels["os"], Arch: p.Selector.MatchLabels["arch"]}
		if len(p.Selector.MatchLabels) != 2 || slices.Contains(seen, pl) {
			fail("platform selector %v: want os and arch, once each platform", p.Selector.MatchLabels)
			continue
		}
		seen = append(seen, pl)
		name := path.Base(p.URI)
		named[name] = true
		if err := verifyPlatform(dir, r, pl, p, name); err != nil {
			fail("%s: %w", pl, err)
		}
	}
	if !slices.Equal(seen, r.Platforms) {
		fail("manifest platforms %v, want %v", seen, r.Platforms)
	}
	all, err := filepath.Glob(filepath.Join(dir, pluginBin+"_*.tar.gz"))
	if err != nil {
		return err
	}
	for _, f := range all {
		if !named[filepath.Base(f)] {
			fail("%s: an archive the manifest does not name", f)
		}
	}
	return errors.Join(errs...)
}

// verifyPlatform checks one platform's entry against its archive and
// checksum file.
func verifyPlatform(dir string, r release, p reproducible.Platform, e krewPlatform, name string) error {
	if want := strings.TrimSuffix(r.URL, "/") + "/" + archiveName(r.Version, p); e.URI != want {
		return fmt.Errorf("uri %s, want %s", e.URI, want)
	}
	if e.Bin != pluginBin {
		return fmt.Errorf("bin %q, want %q", e.Bin, pluginBin)
	}
	want := []krewFile{{From: pluginBin, To: "."}, {From: licenseFile, To: "."}}
	if !slices.Equal(e.Files, want) {
		return fmt.Errorf("files %v, want %v", e.Files, want)
	}
	a, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	if got := sha256Hex(a); e.Sha256 != got {
		return fmt.Errorf("manifest sha256 %s, the archive's %s", e.Sha256, got)
	}
	sum, err := os.ReadFile(filepath.Join(dir, name+".sha256"))
	if err != nil {
		return err
	}
	if got := checksumLine(name, a); string(sum) != got {
		return fmt.Errorf("%s.sha256 holds %q, want %q", name, sum, got)
	}
	files, modes, err := readArchive(a)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if len(files) != 2 || files[pluginBin] == nil || files[licenseFile] == nil {
		return fmt.Errorf("%s holds %v, want %s and %s", name, slices.Sorted(maps.Keys(files)), pluginBin, licenseFile)
	}
	if !bytes.Equal(files[licenseFile], r.License) {
		return fmt.Errorf("%s: LICENSE differs from the repository's", name)
	}
	if modes[pluginBin]&0o111 == 0 {
		return fmt.Errorf("%s: %s is not executable (mode %o)", name, pluginBin, modes[pluginBin])
	}
	got, err := binaryPlatform(files[pluginBin])
	if err != nil {
		return fmt.Errorf("%s: %s: %w", name, pluginBin, err)
	}
	if got != p {
		return fmt.Errorf("%s: %s is built for %s", name, pluginBin, got)
	}
	return nil
}

// readArchive returns the regular files of a tar.gz and their modes.
func readArchive(a []byte) (map[string][]byte, map[string]int64, error) {
	zr, err := gzip.NewReader(bytes.NewReader(a))
	if err != nil {
		return nil, nil, err
	}
	tr := tar.NewReader(zr)
	files, modes := map[string][]byte{}, map[string]int64{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, modes, nil
		}
		if err != nil {
			return nil, nil, err
		}
		if h.Typeflag != tar.TypeReg {
			return nil, nil, fmt.Errorf("%s: not a regular file", h.Name)
		}
		if files[h.Name], err = io.ReadAll(tr); err != nil {
			return nil, nil, err
		}
		modes[h.Name] = h.Mode
	}
}

// binaryPlatform reads the platform an executable is built for from its
// ELF (linux) or Mach-O (darwin) header.
func binaryPlatform(b []byte) (reproducible.Platform, error) {
	if f, err := elf.NewFile(bytes.NewReader(b)); err == nil {
		defer f.Close()
		arch := map[elf.Machine]string{elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64"}[f.Machine]
		if arch == "" || f.Type != elf.ET_EXEC {
			return reproducible.Platform{}, fmt.Errorf("an ELF %s for %s, not a linux/amd64 or linux/arm64 executable", f.Type, f.Machine)
		}
		return reproducible.Platform{OS: "linux", Arch: arch}, nil
	}
	if f, err := macho.NewFile(bytes.NewReader(b)); err == nil {
		defer f.Close()
		arch := map[macho.Cpu]string{macho.CpuAmd64: "amd64", macho.CpuArm64: "arm64"}[f.Cpu]
		if arch == "" || f.Type != macho.TypeExec {
			return reproducible.Platform{}, fmt.Errorf("a Mach-O %s for %s, not a darwin/amd64 or darwin/arm64 executable", f.Type, f.Cpu)
		}
		return reproducible.Platform{OS: "darwin", Arch: arch}, nil
	}
	return reproducible.Platform{}, errors.New("neither ELF nor Mach-O")
}
