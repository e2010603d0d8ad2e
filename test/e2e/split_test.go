package e2e

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/operator-framework/oria/test/childrun"
	"github.com/operator-framework/oria/test/localcluster"
	"github.com/operator-framework/oria/test/oriaproc"
)

// The suite runs in two processes of this test binary, side by side, each
// with a control plane, a kube-controller-manager and an oria of its own
// (package childrun): most of an end-to-end test is waiting (oria's
// recheck, a window's edge, a namespace's deletion), so the two halves on
// two cores take little longer than one, and the suite about half as long.
// The second process runs secondProcess, this one everything else. Since
// each has its own cluster and oria, a test may go to either: a test that
// restarts oria, or asserts on its metrics or log, does so only in its own
// process. A new test runs in the first unless it is listed.
//
// Only a whole run is split: with -run or -skip, or ORIA_E2E_SERIAL=1,
// everything runs in this one process.

// secondProcess are the tests of the second process, about half of the
// suite's time (docs/development.md, "Where the time of make test goes"):
// the four that run beside each other (runsBeside) and the longest serial
// ones.
var secondProcess = []string{
	"TestEachSampleAlone", "TestCeilingHoldsForTheLifeOfABinding", "TestWarningEventsEndToEnd", "TestRecreatedNamespaceIsNotRebound",
	"TestExampleAlerts", "TestPublicationRestartsTheOperator", "TestGatedPolicyWindow", "TestRBACPolicyAsAnAdminWouldCheckIt",
	"TestTimeBoundGrants", "TestKubectlOriaRequestApprove",
}

// secondProcessEnv marks the second process.
const secondProcessEnv = "ORIA_E2E_SECOND_PROCESS"

// secondProcessPattern matches exactly the tests of secondProcess (and
// their subtests).
func secondProcessPattern() string {
	quoted := make([]string, len(secondProcess))
	for i, name := range secondProcess {
		quoted[i] = regexp.QuoteMeta(name)
	}
	return "^(" + strings.Join(quoted, "|") + ")$"
}

// splitRun reports whether this process starts the second one: a whole
// run (no -run, no -skip), not itself the second, not ORIA_E2E_SERIAL=1,
// not -short.
func splitRun(short bool) bool {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.run" || f.Name == "test.skip" })
	return !short && !given && os.Getenv(secondProcessEnv) == "" && os.Getenv("ORIA_E2E_SERIAL") == ""
}

// startSecondProcess builds oria once for both processes, starts the
// second and skips its tests here. nil when it could not be started (the
// error is printed, and this process then fails).
func startSecondProcess() (*childrun.Run, error) {
	if _, err := oriaproc.BuildCached(localcluster.RepoRoot()); err != nil {
		return nil, fmt.Errorf("building oria: %w", err)
	}
	pattern := secondProcessPattern()
	if err := flag.Set("test.skip", pattern); err != nil {
		return nil, fmt.Errorf("skipping the second process's tests here: %w", err)
	}
	fmt.Fprintf(os.Stderr, "=== e2e: %d tests in a second process, on a control plane of its own (ORIA_E2E_SERIAL=1: all in this one)\n", len(secondProcess))
	return childrun.Start("e2e second process", []string{secondProcessEnv + "=1"}, "-test.run="+pattern), nil
}

// TestSecondProcessList: every test secondProcess names exists in this
// package (a renamed test would otherwise silently move back to the first
// process), and its pattern matches those names exactly, not a test whose
// name starts with one of them.
func TestSecondProcessList(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]bool{}
	fset := gotoken.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") {
				tests[fn.Name.Name] = true
			}
		}
	}
	re := regexp.MustCompile(secondProcessPattern())
	for _, name := range secondProcess {
		if !tests[name] {
			t.Errorf("secondProcess names %s, which is no test of this package", name)
		}
	}
	n := 0
	for name := range tests {
		if re.MatchString(name) {
			n++
		}
	}
	if n != len(secondProcess) {
		t.Errorf("the second process's pattern matches %d tests, want the %d it lists", n, len(secondProcess))
	}
	if !tests["TestTimeBoundGrantsAcrossADownOria"] || re.MatchString("TestTimeBoundGrantsAcrossADownOria") {
		t.Error("the pattern should match TestTimeBoundGrants, not TestTimeBoundGrantsAcrossADownOria")
	}
}
