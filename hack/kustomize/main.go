// Command kustomize renders one of oria's kustomize bases as `kustomize
// build` would, with only Go (hack/installer):
//
//	go run ./hack/kustomize [-image registry/oria:v0.1.0] [-version v0.1.0] [-o dist/install.yaml] [config/default]
//
// -image sets oria's image as `kustomize edit set image oria=...` would,
// without changing the tree; -version labels every object
// app.kubernetes.io/version=<version> (installer.RenderVersion), which
// `kubectl oria check` compares with the plugin's version. `make
// build-installer` and `make deploy` use it.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/operator-framework/oria/hack/installer"
	"github.com/operator-framework/oria/test/localcluster"
)

func main() {
	image := flag.String("image", "", "oria's image, e.g. registry.example.com/oria:v0.1.0 (default: config/manager's)")
	version := flag.String("version", "", "label every object app.kubernetes.io/version=VERSION (default: no label)")
	out := flag.String("o", "", "write the YAML stream to this file (its directory is created) instead of stdout")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./hack/kustomize [-image IMG] [-version VERSION] [-o FILE] [DIR (default %s)]\n", installer.DefaultDir)
		flag.PrintDefaults()
	}
	flag.Parse()
	dir := installer.DefaultDir
	switch flag.NArg() {
	case 0:
	case 1:
		dir = flag.Arg(0)
	default:
		flag.Usage()
		os.Exit(2)
	}
	render := installer.Render
	if *version != "" {
		render = func(root, dir, image string) ([]byte, error) {
			return installer.RenderVersion(root, dir, image, *version)
		}
	}
	b, err := render(localcluster.RepoRoot(), dir, *image)
	if err == nil {
		err = write(*out, b)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kustomize: %v\n", err)
		os.Exit(1)
	}
}

func write(path string, b []byte) error {
	if path == "" {
		_, err := os.Stdout.Write(b)
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
