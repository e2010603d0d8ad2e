package cli

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SkippedObject is an object of plan's files that plan does not take.
type SkippedObject struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	// Name is namespace/name for a namespaced object.
	Name   string `json:"name"`
	Source string `json:"source"`
	Reason string `json:"reason"`
}

// fileExtensions are the files plan reads in a directory, as kubectl -f.
var fileExtensions = []string{".json", ".yaml", ".yml"}

// Files are plan's -f inputs.
type Files struct {
	// Names are files, directories, or "-" (standard input).
	Names []string
	// Recursive reads the directories' subdirectories too (-R).
	Recursive bool
}

// ReadFiles decodes the objects of the files: a named file whatever its
// extension, a directory's .json, .yaml and .yml files (in lexical order,
// and its subdirectories' with Recursive), standard input for "-". It
// returns the objects plan takes and those it skips; no object at all is
// an error.
func ReadFiles(files Files, stdin io.Reader) ([]client.Object, []SkippedObject, error) {
	scheme, err := Scheme()
	if err != nil {
		return nil, nil, err
	}
	var paths []string
	for _, name := range files.Names {
		p, err := expand(name, files.Recursive)
		if err != nil {
			return nil, nil, err
		}
		paths = append(paths, p...)
	}
	var objs []client.Object
	var skipped []SkippedObject
	for _, p := range paths {
		o, s, err := decodePath(p, stdin, scheme)
		if err != nil {
			return nil, nil, err
		}
		objs, skipped = append(objs, o...), append(skipped, s...)
	}
	if len(objs)+len(skipped) == 0 {
		return nil, nil, fmt.Errorf("no object in %s", strings.Join(files.Names, ", "))
	}
	return objs, skipped, nil
}

// expand returns the files of name: itself, or a directory's files.
func expand(name string, recursive bool) ([]string, error) {
	if name == "-" {
		return []string{name}, nil
	}
	info, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{name}, nil
	}
	var out []string
	err = filepath.WalkDir(name, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && p != name && !recursive:
			return filepath.SkipDir
		case !d.IsDir() && slices.Contains(fileExtensions, filepath.Ext(p)):
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

// decodePath decodes the objects of one file, or of stdin for "-".
func decodePath(p string, stdin io.Reader, scheme *runtime.Scheme) ([]client.Object, []SkippedObject, error) {
	if p == "-" {
		return Decode(stdin, "standard input", scheme)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = f.Close() }()
	return Decode(f, p, scheme)
}
