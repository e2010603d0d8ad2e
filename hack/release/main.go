// Command release writes the kubectl plugin's release artifacts under a
// directory (dist/): for each platform a tar.gz of the static, -trimpath
// kubectl-oria and the LICENSE, its <archive>.sha256, and the krew plugin
// manifest plugins/oria.yaml whose URIs (-url/<archive>) and checksums name
// those archives. It then reads everything back and checks that the
// manifest, the checksum files and the archives agree.
//
//	go run ./hack/release -version v0.1.0 -url https://github.com/operator-framework/oria/releases/download/v0.1.0 -o dist
//
// `make release` runs it after `make image` and `make build-installer`.
// Timestamps are the source date (SOURCE_DATE_EPOCH, else the commit time),
// so two runs on one commit write the same bytes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/operator-framework/oria/hack/reproducible"
)

// release is what one run writes.
type release struct {
	Version, URL string
	Platforms    []reproducible.Platform
	License      []byte
	Date         time.Time
}

func main() {
	var (
		r                       release
		root, out, ldflags, pls string
	)
	flag.StringVar(&r.Version, "version", "", "the release, vX.Y.Z (krew's spec.version, in the archive names)")
	flag.StringVar(&r.URL, "url", "", "where the archives are downloaded from (default https://github.com/operator-framework/oria/releases/download/<version>)")
	flag.StringVar(&out, "o", "dist", "the directory to write to")
	flag.StringVar(&root, "root", ".", "the module's root (LICENSE, ./cmd/kubectl-oria)")
	flag.StringVar(&ldflags, "ldflags", "", `linker flags (default "-s -w -X github.com/operator-framework/oria/internal/cli.Version=<version>")`)
	flag.StringVar(&pls, "platforms", "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64", "the plugin's platforms")
	flag.Parse()
	if flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, r, root, out, ldflags, pls); err != nil {
		fmt.Fprintf(os.Stderr, "release: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, r release, root, out, ldflags, pls string) error {
	var err error
	if err = checkVersion(r.Version); err != nil {
		return err
	}
	if r.URL == "" {
		r.URL = "https://github.com/operator-framework/oria/releases/download/" + r.Version
	}
	if ldflags == "" {
		ldflags = "-s -w -X github.com/operator-framework/oria/internal/cli.Version=" + r.Version
	}
	if r.Platforms, err = reproducible.ParsePlatforms(pls); err != nil {
		return err
	}
	if r.License, err = os.ReadFile(filepath.Join(root, licenseFile)); err != nil {
		return err
	}
	if r.Date, err = reproducible.SourceDate(root); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "oria-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	b := reproducible.Build{Dir: root, Package: "./cmd/kubectl-oria", LDFlags: ldflags}
	binaries := map[reproducible.Platform][]byte{}
	for _, p := range r.Platforms {
		start := time.Now()
		bin := filepath.Join(work, p.OS+"-"+p.Arch, pluginBin)
		if err := b.Run(ctx, p, bin); err != nil {
			return err
		}
		if binaries[p], err = os.ReadFile(bin); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "release: built %s for %s (%s)\n", pluginBin, p, time.Since(start).Round(100*time.Millisecond))
	}
	written, err := r.write(out, binaries)
	if err != nil {
		return err
	}
	if err := verify(out, r); err != nil {
		return fmt.Errorf("the written release does not check: %w", err)
	}
	for _, f := range written {
		fmt.Fprintf(os.Stderr, "release: wrote %s\n", f)
	}
	return nil
}

// write writes the archives, their checksum files and the krew manifest
// under dir, after removing the plugin archives of earlier runs, and
// returns the paths it wrote.
func (r release) write(dir string, binaries map[reproducible.Platform][]byte) ([]string, error) {
	stale, err := filepath.Glob(filepath.Join(dir, pluginBin+"_*.tar.gz*"))
	if err != nil {
		return nil, err
	}
	for _, f := range stale {
		if err := os.Remove(f); err != nil {
			return nil, err
		}
	}
	var (
		written  []string
		archives []releasedArchive
	)
	put := func(path string, b []byte) error {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		written = append(written, path)
		return os.WriteFile(path, b, 0o644)
	}
	for _, p := range r.Platforms {
		bin, ok := binaries[p]
		if !ok {
			return nil, fmt.Errorf("no %s for %s", pluginBin, p)
		}
		a, err := archive(bin, r.License, r.Date)
		if err != nil {
			return nil, fmt.Errorf("archive for %s: %w", p, err)
		}
		name := archiveName(r.Version, p)
		if err := errors.Join(put(filepath.Join(dir, name), a), put(filepath.Join(dir, name+".sha256"), []byte(checksumLine(name, a)))); err != nil {
			return nil, err
		}
		archives = append(archives, releasedArchive{Platform: p, Name: name, Sha256: sha256Hex(a)})
	}
	m, err := krewManifest(r.Version, r.URL, archives)
	if err != nil {
		return nil, err
	}
	if err := put(manifestPath(dir), m); err != nil {
		return nil, err
	}
	return written, nil
}

// manifestPath is the krew manifest under dir: plugins/oria.yaml, the path
// krew-index and `kubectl krew install --manifest` use.
func manifestPath(dir string) string {
	return filepath.Join(dir, "plugins", pluginName+".yaml")
}
