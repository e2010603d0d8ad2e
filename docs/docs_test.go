// Package docs holds oria's documentation. Its test keeps the YAML examples
// honest: each one must be, verbatim, a file under config/ — a sample of
// config/samples (which the end-to-end tests apply to a real cluster) or
// the example alerts of config/prometheus (which they check as promtool does)
// — so the docs cannot rot.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

func TestYAMLExamplesAreSamples(t *testing.T) {
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join("..", "README.md"))
	found := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range yamlBlock.FindAllStringSubmatch(string(b), -1) {
			found++
			block := m[1]
			first, rest, _ := strings.Cut(block, "\n")
			file, ok := strings.CutPrefix(first, "# config/")
			if !ok {
				t.Errorf("%s: a yaml example must start with '# config/<dir>/<file>' and be that file; it starts with %q", doc, first)
				continue
			}
			want, err := os.ReadFile(filepath.Join("..", "config", filepath.FromSlash(file)))
			if err != nil {
				t.Errorf("%s: example names config/%s: %v", doc, file, err)
				continue
			}
			if strings.TrimSpace(rest) != strings.TrimSpace(string(want)) {
				t.Errorf("%s: the example of config/%s differs from the file; copy the file into the doc", doc, file)
			}
		}
	}
	if found == 0 {
		t.Fatal("no yaml examples found: the test is not looking at the docs")
	}
}

// TestLinkedFilesExist checks the relative links and the config/samples
// paths the docs mention.
func TestLinkedFilesExist(t *testing.T) {
	mentions := regexp.MustCompile(`config/samples/[a-z0-9.-]+\.yaml|\]\(([a-z0-9./-]+\.md)\)`)
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range append(docs, filepath.Join("..", "README.md")) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mentions.FindAllStringSubmatch(string(b), -1) {
			path := filepath.Join("..", m[0])
			if m[1] != "" {
				path = filepath.Join(filepath.Dir(doc), m[1])
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s mentions %s, which does not exist", doc, m[0])
			}
		}
	}
}

// TestEverySampleIsAppliedEndToEnd checks that each config/samples file is
// applied by name in an end-to-end test (test/e2e applies them to a real
// cluster and checks what they do).
func TestEverySampleIsAppliedEndToEnd(t *testing.T) {
	samples, err := filepath.Glob(filepath.Join("..", "config", "samples", "*.yaml"))
	if err != nil || len(samples) == 0 {
		t.Fatalf("no samples found: %v", err)
	}
	sources, err := filepath.Glob(filepath.Join("..", "test", "e2e", "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, s := range sources {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	for _, s := range samples {
		if !strings.Contains(all.String(), `applySample(t, "`+filepath.Base(s)+`")`) {
			t.Errorf("config/samples/%s is not applied by any end-to-end test (applySample(t, %q))", filepath.Base(s), filepath.Base(s))
		}
	}
}
