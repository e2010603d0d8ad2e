package install

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/operator-framework/oria/test/localcluster"
)

// dockerignore is a .dockerignore file, matched as Docker matches it: the
// last pattern that matches a path or one of its parent directories decides,
// "!" re-includes, "*" and "?" stay within a path element, "**" spans any.
type dockerignore []ignoreRule

type ignoreRule struct {
	pattern string
	re      *regexp.Regexp
	include bool
}

func readDockerignore(t testing.TB) dockerignore {
	t.Helper()
	f, err := os.Open(filepath.Join(localcluster.RepoRoot(), ".dockerignore"))
	require.NoError(t, err, "a .dockerignore keeps the build context small")
	defer f.Close()
	var out dockerignore
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r := ignoreRule{}
		if strings.HasPrefix(line, "!") {
			r.include, line = true, line[1:]
		}
		r.pattern = strings.TrimPrefix(filepath.ToSlash(filepath.Clean(line)), "/")
		r.re = regexp.MustCompile("^" + globRegexp(r.pattern) + "$")
		out = append(out, r)
	}
	require.NoError(t, sc.Err())
	return out
}

func globRegexp(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case strings.HasPrefix(p[i:], "**/"):
			b.WriteString("(.*/)?")
			i += 2
		case strings.HasPrefix(p[i:], "**"):
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	return b.String()
}

// excluded reports whether path (slash-separated, relative to the context)
// is left out of the build context.
func (d dockerignore) excluded(path string) bool {
	out := false
	for _, r := range d {
		if r.matches(path) {
			out = !r.include
		}
	}
	return out
}

func (r ignoreRule) matches(path string) bool {
	for p := path; p != "." && p != ""; p = filepath.ToSlash(filepath.Dir(p)) {
		if r.re.MatchString(p) {
			return true
		}
	}
	return false
}

// reincludesUnder reports whether a "!" rule could bring back something
// under dir.
func (d dockerignore) reincludesUnder(dir string) bool {
	for _, r := range d {
		literal := r.pattern
		if i := strings.IndexAny(literal, "*?["); i >= 0 {
			literal = literal[:i]
		}
		if r.include && (strings.HasPrefix(literal, dir+"/") || literal == dir || literal == "") {
			return true
		}
	}
	return false
}

// context walks root as a builder would send it: the total size and number
// of the files sent, and those sent that are not under what the Dockerfile
// copies (go.mod, go.sum, api, cmd, internal).
func (d dockerignore) context(t testing.TB, root string) (size int64, files int, leaked []string) {
	t.Helper()
	copied := map[string]bool{"go.mod": true, "go.sum": true, "api": true, "cmd": true, "internal": true}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if e.IsDir() {
			if d.excluded(rel) && !d.reincludesUnder(rel) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.excluded(rel) || rel == ".dockerignore" || rel == "Dockerfile" {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		size += info.Size()
		files++
		if !copied[strings.SplitN(rel, "/", 2)[0]] {
			leaked = append(leaked, rel)
		}
		return nil
	})
	require.NoError(t, err)
	return size, files, leaked
}
