// Command kustomize renders one of oria's kustomize bases as `kustomize
// build` would, with only Go (hack/installer):
//
//	go run ./hack/kustomize [-image registry/oria:v0.1.0] [-o dist/install.yaml] [config/default]
//
// -image sets oria's image as `kustomize edit set image oria=...` would,
// without changing the tree. `make build-installer` and `make deploy` use it.
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
	out := flag.String("o", "", "write the YAML stream to this file (its directory is created) instead of stdout")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./hack/kustomize [-image IMG] [-o FILE] [DIR (default %s)]\n", installer.DefaultDir)
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
	b, err := installer.Render(localcluster.RepoRoot(), dir, *image)
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
