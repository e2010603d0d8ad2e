package docs

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoPath is a backticked path in the glossary's file column: under one of
// the repository's top directories, or a file name ("narrow.go") in the
// directory of the path before it in the same cell.
var repoPath = regexp.MustCompile("`((?:api|cmd|config|docs|hack|internal|test)/[^`]*|[a-z0-9_]+\\.(?:go|yaml))`")

// TestGlossaryNamesItsFiles keeps the glossary of docs/development.md true:
// every term has one row, a meaning, and a file (or package) that exists.
func TestGlossaryNamesItsFiles(t *testing.T) {
	b, err := os.ReadFile("development.md")
	if err != nil {
		t.Fatal(err)
	}
	_, glossary, ok := strings.Cut(string(b), "\n## Glossary\n")
	if !ok {
		t.Fatal("development.md has no Glossary section")
	}
	glossary, _, _ = strings.Cut(glossary, "\n## ")
	terms := map[string]bool{}
	for _, line := range strings.Split(glossary, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 5 || cells[1] == " term " || strings.HasPrefix(cells[1], "---") {
			continue
		}
		term, meaning, files := strings.TrimSpace(cells[1]), strings.TrimSpace(cells[2]), cells[3]
		if terms[term] {
			t.Errorf("%q has two rows: one word, one meaning", term)
		}
		terms[term] = true
		if meaning == "" {
			t.Errorf("%q has no meaning", term)
		}
		dir := ""
		paths := repoPath.FindAllStringSubmatch(files, -1)
		if len(paths) == 0 {
			t.Errorf("%q names no file: %q", term, files)
		}
		for _, m := range paths {
			p := m[1]
			if strings.Contains(p, "/") {
				dir = path.Dir(p)
			} else {
				p = path.Join(dir, p)
			}
			if _, err := os.Stat(filepath.Join("..", filepath.FromSlash(p))); err != nil {
				t.Errorf("%q names %s, which does not exist: %v", term, p, err)
			}
		}
	}
	if len(terms) < 10 {
		t.Errorf("found %d glossary rows; is the table still there?", len(terms))
	}
}
