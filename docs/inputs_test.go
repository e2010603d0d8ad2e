package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The packages whose code decides what oria grants: the controllers and the
// pure functions they call. Every input they read that someone other than
// the guard could have written must be in the table of development.md,
// "What oria reads, and who can write it" (issue 38).
var decidingPackages = []string{
	"internal/controller", "internal/binding", "internal/policy", "internal/engine", "internal/lookup",
	"internal/ownership", "internal/genroles", "internal/bundlerole", "internal/publish", "internal/olm", "internal/eligibility",
}

// metadataInputs are the metadata fields that carry authority, by the Go
// name a read uses (a field or its getter).
var metadataInputs = map[string]string{
	"Generation": "metadata.generation", "GetGeneration": "metadata.generation",
	"UID": "metadata.uid", "GetUID": "metadata.uid",
	"OwnerReferences": "metadata.ownerReferences", "GetOwnerReferences": "metadata.ownerReferences",
	"Finalizers": "metadata.finalizers", "GetFinalizers": "metadata.finalizers",
	"DeletionTimestamp": "metadata.deletionTimestamp", "GetDeletionTimestamp": "metadata.deletionTimestamp",
	"ManagedFields": "metadata.managedFields", "GetManagedFields": "metadata.managedFields",
	"AggregationRule": "aggregationRule",
}

// readInputs returns every input the deciding packages read, as the table
// names it: status.<field> of oria's kinds, metadata.<field>, and the
// labels and annotations read by key (the key's constant).
func readInputs(t *testing.T) map[string][]string {
	t.Helper()
	found := map[string][]string{}
	add := func(input string, fset *token.FileSet, pos token.Pos) {
		p := fset.Position(pos)
		found[input] = append(found[input], filepath.ToSlash(p.Filename)+":"+strconv.Itoa(p.Line))
	}
	for _, dir := range decidingPackages {
		err := filepath.WalkDir(filepath.Join("..", dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.SelectorExpr:
					if inner, ok := x.X.(*ast.SelectorExpr); ok && inner.Sel.Name == "Status" && x.Sel.Name != "DeepCopy" {
						add("status."+lowerFirst(x.Sel.Name), fset, x.Pos())
					}
					if m, ok := metadataInputs[x.Sel.Name]; ok {
						add(m, fset, x.Pos())
					}
				case *ast.IndexExpr:
					switch key := labelKey(x); key {
					case "":
					case computedKey:
						rel, _ := filepath.Rel("..", path)
						add("keys computed in "+filepath.ToSlash(rel), fset, x.Pos())
					default:
						add(key, fset, x.Pos())
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return found
}

// labelKey returns the constant that a read of a label or an annotation by
// key names (x.Labels[oriav1alpha1.LabelManaged] -> LabelManaged), "" for
// any other index expression.
func labelKey(x *ast.IndexExpr) string {
	var of string
	switch m := x.X.(type) {
	case *ast.SelectorExpr:
		of = m.Sel.Name
	case *ast.CallExpr:
		if s, ok := m.Fun.(*ast.SelectorExpr); ok {
			of = s.Sel.Name
		}
	}
	if !slices.Contains([]string{"Labels", "Annotations", "GetLabels", "GetAnnotations"}, of) {
		return ""
	}
	switch k := x.Index.(type) {
	case *ast.SelectorExpr:
		return k.Sel.Name
	case *ast.BasicLit:
		return k.Value
	}
	return computedKey
}

// computedKey stands for a label or annotation read by a key computed at
// run time (a variable, a call): the table names the file.
const computedKey = "(computed)"

func lowerFirst(s string) string { return strings.ToLower(s[:1]) + s[1:] }

// tableRow is a row of the inputs table: its first cell holds the inputs
// it answers for, each in backquotes.
var tableRow = regexp.MustCompile("(?m)^\\| ([^|]*)\\|")
var quoted = regexp.MustCompile("`([^`]+)`")

// TestEveryInputIsInTheTable: a controller that starts reading a new input
// (a status field, a label or annotation, a metadata field) fails this test
// until development.md says who can write it and why it cannot widen a
// grant.
func TestEveryInputIsInTheTable(t *testing.T) {
	b, err := os.ReadFile("development.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "## What oria reads, and who can write it")
	if start < 0 {
		t.Fatal(`development.md has no section "What oria reads, and who can write it"`)
	}
	section := doc[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	listed := map[string]bool{}
	for _, row := range tableRow.FindAllStringSubmatch(section, -1) {
		for _, q := range quoted.FindAllStringSubmatch(row[1], -1) {
			listed[q[1]] = true
		}
	}
	found := readInputs(t)
	if len(found) < 10 {
		t.Fatalf("found only %d inputs: the scan is broken", len(found))
	}
	for _, input := range slices.Sorted(maps.Keys(found)) {
		if !listed[input] {
			t.Errorf("%s is read (%s) but not in development.md's inputs table", input, strings.Join(found[input][:min(3, len(found[input]))], ", "))
		}
	}
}
