// Command image builds oria's image in Go, with no container daemon
// (go-containerregistry): for each platform a static, -trimpath oria binary
// in one layer on an empty image, with the entrypoint, user 65532:65532, the
// platform and OCI labels in its config; the images in one multi-platform
// index, written as an OCI image layout and, when -img names a registry,
// pushed there.
//
//	go run ./hack/image -img registry.example.com/oria:v0.1.0 -version v0.1.0 -o dist/image
//
// `make image` runs it. Every timestamp is the source date
// (SOURCE_DATE_EPOCH, else the commit time), the tar and gzip streams are
// deterministic and the build is -trimpath, so two builds of one commit
// give the same digest. It prints the pinned reference, <repository>@<digest>,
// on stdout (what `make release` pins install.yaml to) and what it did on
// stderr.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/operator-framework/oria/hack/reproducible"
)

// config is what a build needs, from the flags.
type config struct {
	Root, Package, LDFlags string
	Platforms              []reproducible.Platform
	Meta                   meta
}

func main() {
	var (
		c         config
		platforms string
		img, repo string
		out       string
	)
	flag.StringVar(&img, "img", "", "push to this image reference when it names a registry (IMG); oria:latest names none")
	flag.StringVar(&repo, "repo", "ghcr.io/operator-framework/oria", "the repository of the printed reference when -img names no registry")
	flag.StringVar(&out, "o", "dist/image", "write the OCI image layout to this directory (replaced)")
	flag.StringVar(&c.Root, "root", ".", "the module's root")
	flag.StringVar(&c.Package, "pkg", "./cmd/oria", "the command to build")
	flag.StringVar(&c.LDFlags, "ldflags", "", `linker flags (default "-s -w -X main.version=<version>")`)
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "the platforms of the index, in its order")
	flag.StringVar(&c.Meta.Version, "version", "dev", "the version (label org.opencontainers.image.version, tag in the OCI layout)")
	flag.StringVar(&c.Meta.Revision, "revision", "", "the commit (label org.opencontainers.image.revision; default: git rev-parse HEAD)")
	flag.StringVar(&c.Meta.Source, "source", "https://github.com/operator-framework/oria", "the source repository (label org.opencontainers.image.source)")
	flag.Parse()
	if flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, c, target{Platforms: platforms, Img: img, Repo: repo, Out: out}, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
}

// target is where a build goes: its platforms, the OCI layout Out, the
// registry of Img if it names one, Repo for the printed reference if not.
type target struct {
	Platforms, Img, Repo, Out string
}

// run builds the image, writes it to t.Out, pushes it if t.Img names a
// registry, and prints the pinned reference on stdout, what it did on
// stderr.
func run(ctx context.Context, c config, t target, stdout, stderr io.Writer) error {
	var err error
	if c.Platforms, err = reproducible.ParsePlatforms(t.Platforms); err != nil {
		return err
	}
	if c.LDFlags == "" {
		c.LDFlags = "-s -w -X main.version=" + c.Meta.Version
	}
	if c.Meta.Revision == "" {
		if c.Meta.Revision, err = reproducible.Revision(c.Root); err != nil {
			return err
		}
	}
	if c.Meta.Created, err = reproducible.SourceDate(c.Root); err != nil {
		return err
	}
	ref, pushing, err := registryRef(t.Img)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "oria-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	idx, err := build(ctx, c, work)
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	if err := writeLayout(t.Out, idx, c.Meta.Version); err != nil {
		return err
	}
	report(stderr, idx, t.Out)
	if pushing {
		if err := push(ctx, ref, idx); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "image: pushed %s@%s\n", ref, digest)
	} else {
		fmt.Fprintf(stderr, "image: not pushed: IMG=%q names no registry\n", t.Img)
	}
	pinned, err := pinnedRef(t.Img, t.Repo, digest)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, pinned)
	return err
}

// build builds the binary for each platform into work and assembles the
// index.
func build(ctx context.Context, c config, work string) (v1.ImageIndex, error) {
	b := reproducible.Build{Dir: c.Root, Package: c.Package, LDFlags: c.LDFlags}
	binaries := map[reproducible.Platform][]byte{}
	for _, p := range c.Platforms {
		out := filepath.Join(work, p.OS+"-"+p.Arch, "oria")
		if err := b.Run(ctx, p, out); err != nil {
			return nil, err
		}
		data, err := os.ReadFile(out)
		if err != nil {
			return nil, err
		}
		binaries[p] = data
	}
	return index(binaries, c.Platforms, c.Meta)
}

// report prints the index's digest and each platform's.
func report(w io.Writer, idx v1.ImageIndex, out string) {
	d, err := idx.Digest()
	if err != nil {
		return
	}
	fmt.Fprintf(w, "image: index %s (OCI layout %s)\n", d, out)
	m, err := idx.IndexManifest()
	if err != nil {
		return
	}
	for _, desc := range m.Manifests {
		fmt.Fprintf(w, "image:   %s %s\n", desc.Platform, desc.Digest)
	}
}
