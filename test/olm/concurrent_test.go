package olm

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/operator-framework/oria/test/childrun"
	"github.com/operator-framework/oria/test/localcluster"
	"github.com/operator-framework/oria/test/oriaproc"
)

// The releases run side by side, each in a process of its own (this test
// binary with ORIA_OLM_VERSIONS set to one release), each on a control
// plane of its own: most of a run is waiting (installs through the
// registry and the catalog, the idle minute of TestNoFight, settling), so
// two runs on two cores take little longer than one. The first release
// runs in this process; the others' output follows its own, whole, as if
// they had run after it. ORIA_OLM_SERIAL=1 runs them one after the other
// in this process instead (package childrun).

// concurrently reports whether the releases run side by side.
func concurrently(releases []olmRelease) bool {
	return len(releases) > 1 && os.Getenv("ORIA_OLM_SERIAL") == ""
}

// runConcurrently runs releases[0] here and the others in processes of
// their own, at the same time, and returns the first failure's exit code.
func runConcurrently(m *testing.M, releases []olmRelease) int {
	// oria built once, before the runs share it (oriaproc's cache).
	if _, err := oriaproc.BuildCached(localcluster.RepoRoot()); err != nil {
		fmt.Fprintf(os.Stderr, "oria: %v\n", err)
		return 1
	}
	var runs []*childrun.Run
	for _, r := range releases[1:] {
		fmt.Fprintf(os.Stderr, "=== olm suite: operator-controller and catalogd %s (%s), in a process of its own\n", r.version, r.dir)
		runs = append(runs, childrun.Start("olm suite "+r.version, []string{"ORIA_OLM_VERSIONS=" + r.version, "ORIA_OLM_SERIAL=1"}))
	}
	first := releases[0]
	fmt.Fprintf(os.Stderr, "=== olm suite: operator-controller and catalogd %s (%s)\n", first.version, first.dir)
	start := time.Now()
	code := runRelease(m, first)
	results := []string{fmt.Sprintf("=== olm suite %s: %s in %s", first.version, childrun.Result(code), time.Since(start).Round(time.Second))}
	fmt.Fprintln(os.Stderr, results[0])
	for _, r := range runs {
		c, result := r.Wait(os.Stdout)
		if code == 0 {
			code = c
		}
		results = append(results, result)
	}
	fmt.Fprintln(os.Stderr, strings.Join(results, "\n"))
	return code
}
