package reproducible

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Platform is an operating system and architecture Go builds for.
type Platform struct {
	OS, Arch string
}

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// ParsePlatforms reads "linux/amd64,linux/arm64".
func ParsePlatforms(s string) ([]Platform, error) {
	var out []Platform
	for _, f := range strings.Split(s, ",") {
		goos, arch, ok := strings.Cut(strings.TrimSpace(f), "/")
		if !ok || goos == "" || arch == "" || strings.Contains(arch, "/") {
			return nil, fmt.Errorf("platform %q: want os/arch", f)
		}
		out = append(out, Platform{OS: goos, Arch: arch})
	}
	return out, nil
}

// Build describes a release build of one Go command.
type Build struct {
	// Dir is the module's root, where `go build` runs.
	Dir string
	// Package is the command, e.g. "./cmd/oria".
	Package string
	// LDFlags are the linker flags, e.g. "-s -w -X main.version=v0.1.0".
	LDFlags string
}

// Args is the `go build` command line for out: -trimpath (no paths of the
// build machine), -buildvcs=false (the binary depends on the sources, not
// on the state of the checkout; images carry the revision in a label).
func (b Build) Args(out string) []string {
	return []string{"build", "-trimpath", "-buildvcs=false", "-ldflags=" + b.LDFlags, "-o", out, b.Package}
}

// Env is the environment of the build for p: the caller's, with what
// changes the output pinned: no cgo (a static binary), the target, the
// baseline instruction sets, and no GOFLAGS of the caller's (-race, -cover
// or -tags would change the binary).
func (b Build) Env(p Platform) []string {
	pinned := map[string]string{
		"CGO_ENABLED": "0",
		"GOOS":        p.OS,
		"GOARCH":      p.Arch,
		"GOAMD64":     "v1",
		"GOARM64":     "v8.0",
		"GOFLAGS":     "",
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := pinned[k]; !ok {
			env = append(env, kv)
		}
	}
	for _, k := range []string{"CGO_ENABLED", "GOOS", "GOARCH", "GOAMD64", "GOARM64", "GOFLAGS"} {
		env = append(env, k+"="+pinned[k])
	}
	return env
}

// Run builds the command for p into out.
func (b Build) Run(ctx context.Context, p Platform, out string) error {
	cmd := exec.CommandContext(ctx, "go", b.Args(out)...)
	cmd.Dir = b.Dir
	cmd.Env = b.Env(p)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s: %w\n%s", b.Package, p, err, msg)
	}
	return nil
}
