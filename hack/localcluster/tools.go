package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// links is a repeated flag: files to link into the state directory's bin/
// (the matching kubectl, the kubectl plugin), under their base names.
type links []string

func (l *links) String() string     { return strings.Join(*l, ",") }
func (l *links) Set(s string) error { *l = append(*l, s); return nil }

func binDir(dir string) string { return filepath.Join(dir, "bin") }

// linkTools links each file into dir/bin, replacing what is there.
func linkTools(dir string, files []string) error {
	if len(files) == 0 {
		return nil
	}
	if err := os.MkdirAll(binDir(dir), 0o755); err != nil {
		return err
	}
	for _, f := range files {
		abs, err := filepath.Abs(f)
		if err != nil {
			return err
		}
		if _, err := os.Stat(abs); err != nil {
			return fmt.Errorf("linking %s into %s: %w", f, binDir(dir), err)
		}
		dst := filepath.Join(binDir(dir), filepath.Base(abs))
		_ = os.Remove(dst)
		if err := os.Symlink(abs, dst); err != nil {
			return err
		}
	}
	return nil
}

// printExports writes the lines that point another terminal at the cluster
// in dir: its kubeconfig, and its bin/ (kubectl of the control plane's
// release, and the plugin) first on PATH when there is one.
func printExports(w io.Writer, dir string) {
	fmt.Fprintln(w, "in another terminal:")
	if _, err := os.Stat(binDir(dir)); err == nil {
		fmt.Fprintf(w, "  export PATH=%s:$PATH\n", binDir(dir))
	}
	fmt.Fprintf(w, "  export KUBECONFIG=%s\n", kubeconfig(dir))
}

// stateContents says what the state directory holds, for the line that says
// it is removed.
const stateContents = "etcd data, certificates, kubeconfig, logs, bin/"
