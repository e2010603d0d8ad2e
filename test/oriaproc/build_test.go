package oriaproc

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBuildKey: the key of a cached oria binary changes with the body of a
// function in a package it imports (not only with what the package
// exports), and with nothing else.
func TestBuildKey(t *testing.T) {
	root := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte(content), 0o644))
	}
	write("go.mod", "module example.com/m\n\ngo 1.22\n")
	write("cmd/m/main.go", "package main\n\nimport \"example.com/m/lib\"\n\nfunc main() { println(lib.Answer()) }\n")
	write("lib/lib.go", "package lib\n\nfunc Answer() int { return 41 }\n")
	key := func() string {
		t.Helper()
		k, err := buildKey(root, "./cmd/m")
		require.NoError(t, err)
		return k
	}
	first := key()
	assert.Equal(t, first, key(), "the same sources, the same key")
	write("lib/lib.go", "package lib\n\nfunc Answer() int { return 42 }\n")
	second := key()
	assert.NotEqual(t, first, second, "a function's body changed")
	write("cmd/m/main.go", "package main\n\nimport \"example.com/m/lib\"\n\nfunc main() { println(lib.Answer() + 1) }\n")
	assert.NotEqual(t, second, key(), "the main package changed")
}

// TestPrune keeps the most recently used builds.
func TestPrune(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	for i, name := range []string{"a", "b", "c"} {
		p := filepath.Join(dir, name)
		require.NoError(t, os.Mkdir(p, 0o755))
		used := now.Add(time.Duration(i) * time.Minute)
		require.NoError(t, os.Chtimes(p, used, used))
	}
	prune(dir, 2)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	assert.Equal(t, []string{"b", "c"}, left)
}
