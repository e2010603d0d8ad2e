package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLinkToolsAndExports: the files make run links (kubectl, the plugin)
// land in DIR/bin, and the exports it prints put DIR/bin first on PATH and
// point KUBECONFIG at the cluster.
func TestLinkToolsAndExports(t *testing.T) {
	src, dir := t.TempDir(), filepath.Join(t.TempDir(), ".local")
	for _, name := range []string{"kubectl", "kubectl-oria"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	printExports(&out, dir)
	if strings.Contains(out.String(), "PATH") {
		t.Errorf("no bin/ yet, no PATH export:\n%s", out.String())
	}
	if err := linkTools(dir, []string{filepath.Join(src, "kubectl"), filepath.Join(src, "kubectl-oria")}); err != nil {
		t.Fatal(err)
	}
	// Linked twice (make run on a cluster of make local-up): replaced.
	if err := linkTools(dir, []string{filepath.Join(src, "kubectl")}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kubectl", "kubectl-oria"} {
		if target, err := os.Readlink(filepath.Join(dir, "bin", name)); err != nil || target != filepath.Join(src, name) {
			t.Errorf("bin/%s -> %q, %v", name, target, err)
		}
	}
	out.Reset()
	printExports(&out, dir)
	want := "in another terminal:\n  export PATH=" + filepath.Join(dir, "bin") + ":$PATH\n  export KUBECONFIG=" + filepath.Join(dir, "kubeconfig") + "\n"
	if out.String() != want {
		t.Errorf("exports:\n%s\nwant:\n%s", out.String(), want)
	}
	if err := linkTools(dir, []string{filepath.Join(src, "missing")}); err == nil {
		t.Error("linking a missing file: no error")
	}
}
