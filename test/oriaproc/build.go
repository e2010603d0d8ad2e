package oriaproc

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// keepBuilds is how many oria binaries the build cache keeps (the most
// recently used).
const keepBuilds = 4

// BuildCached builds ./cmd/oria of the source tree at root once per source
// state, into $ORIA_CACHE_DIR/test-oria/<key>/oria (the cache of
// hack/lib.sh: $ORIA_CACHE_DIR, else $XDG_CACHE_HOME/oria, else
// ~/.cache/oria), and returns the binary's path. `go build -o` links anew
// every time (about 10 CPU-seconds), and `make test` runs oria in six test
// packages. The key is what the link reads: the compiled archive of every
// package oria is made of, as the Go build cache names them by content
// (`go list -export -deps`, about 2 CPU-seconds when they are built), the
// Go environment that changes a build, and the VCS stamp (revision and
// whether the tree is modified) unless GOFLAGS turns it off.
func BuildCached(root string) (string, error) {
	key, err := buildKey(root, "./cmd/oria")
	if err != nil {
		return "", err
	}
	cache, err := cacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "test-oria", key)
	bin := filepath.Join(dir, "oria")
	if fi, err := os.Stat(bin); err == nil && fi.Size() > 0 {
		touch(dir)
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".oria-*")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	cmd := exec.Command("go", "build", "-o", tmp.Name(), "./cmd/oria")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building oria: %w", err)
	}
	// Complete or absent: a package building the same key at the same time
	// replaces it with the same bytes.
	if err := os.Rename(tmp.Name(), bin); err != nil {
		return "", fmt.Errorf("caching oria: %w", err)
	}
	prune(filepath.Dir(dir), keepBuilds)
	return bin, nil
}

// buildKey hashes what the link of the main package pkg of the module at
// root reads (see BuildCached).
func buildKey(root, pkg string) (string, error) {
	h := sha256.New()
	run := func(name string, args ...string) ([]byte, error) {
		cmd := exec.Command(name, args...)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, stderr.String())
		}
		h.Write(out)
		return out, nil
	}
	env, err := run("go", "env", "GOVERSION", "GOFLAGS", "GOOS", "GOARCH", "GOAMD64", "GOEXPERIMENT", "CGO_ENABLED", "CC", "CGO_LDFLAGS")
	if err != nil {
		return "", err
	}
	// Every package's archive, named by its content; the main package last.
	if _, err := run("go", "list", "-export", "-deps", "-f", "{{.ImportPath}} {{.Export}}", pkg); err != nil {
		return "", err
	}
	if !bytes.Contains(env, []byte("-buildvcs=false")) {
		// What `go build` stamps: vcs.revision and vcs.modified (`oria
		// --version` prints them). Without git, nothing is stamped.
		if _, err := run("git", "rev-parse", "HEAD"); err == nil {
			status, _ := exec.Command("git", "-C", root, "status", "--porcelain").Output()
			fmt.Fprintf(h, "modified=%t", len(status) > 0)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// cacheDir is hack/lib.sh's oria_cache_dir.
func cacheDir() (string, error) {
	if d := os.Getenv("ORIA_CACHE_DIR"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "oria"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".cache", "oria"), nil
}

func touch(path string) {
	now := time.Now()
	_ = os.Chtimes(path, now, now)
}

// prune removes all but the keep most recently used builds under dir.
func prune(dir string, keep int) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type build struct {
		path string
		used int64
	}
	var builds []build
	for _, e := range entries {
		if info, err := e.Info(); err == nil && e.IsDir() {
			builds = append(builds, build{filepath.Join(dir, e.Name()), info.ModTime().UnixNano()})
		}
	}
	slices.SortFunc(builds, func(a, b build) int { return cmp.Compare(b.used, a.used) })
	for i := keep; i < len(builds); i++ {
		_ = os.RemoveAll(builds[i].path)
	}
}
