package docs

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// measured matches a measured figure: a size, a duration below the second
// or with decimals, a percentile, a share. Limits and settings (an API's
// 32 KiB, a 30 s interval) are not measurements and do not match.
var measured = regexp.MustCompile(`\b\d[\d,.]*\s?(MB|MiB|GB|GiB)\b|\bp(50|90|99)\b|\b\d[\d,.]*\s?ms\b|\b\d+\.\d+\s?s\b|\b\d+\s?%`)

// TestNoFiguresInCodeComments: benchmark figures go stale in comments, so
// they live in docs/benchmarks.md (History, or "Figures behind the code"),
// and a comment says why and points to the row.
func TestNoFiguresInCodeComments(t *testing.T) {
	fset := token.NewFileSet()
	for _, root := range []string{"../api", "../cmd", "../internal"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.Contains(path, "zz_generated") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
			if err != nil {
				return err
			}
			for _, g := range f.Comments {
				for _, c := range g.List {
					if m := measured.FindString(c.Text); m != "" {
						t.Errorf("%s: a measured figure (%q) in a comment; move it to docs/benchmarks.md and point to the row", fset.Position(c.Pos()), m)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
