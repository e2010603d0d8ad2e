package olm

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

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
// in this process instead.

// concurrently reports whether the releases run side by side.
func concurrently(releases []olmRelease) bool {
	return len(releases) > 1 && os.Getenv("ORIA_OLM_SERIAL") == ""
}

// releaseRun is a release's run in a process of its own.
type releaseRun struct {
	version string
	cmd     *exec.Cmd
	out     *os.File
	start   time.Time
	err     error
}

// startRelease runs the suite against version in a child process, its
// output into a temporary file.
func startRelease(version string) *releaseRun {
	r := &releaseRun{version: version, start: time.Now()}
	if r.out, r.err = os.CreateTemp("", "oria-olm-"+version+"-*.out"); r.err != nil {
		return r
	}
	r.cmd = exec.Command(os.Args[0], childArgs(os.Args[1:])...)
	r.cmd.Env = append(os.Environ(), "ORIA_OLM_VERSIONS="+version, "ORIA_OLM_SERIAL=1")
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	// Not beyond this process, even when it is killed (a timeout).
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	r.err = r.cmd.Start()
	return r
}

// wait waits for the run to end, copies its output to w and returns its
// exit code and result line.
func (r *releaseRun) wait(w io.Writer) (int, string) {
	code := 1
	if r.err == nil {
		r.err = r.cmd.Wait()
		code = r.cmd.ProcessState.ExitCode()
	}
	if r.out != nil {
		_, _ = r.out.Seek(0, io.SeekStart)
		_, _ = io.Copy(w, r.out)
		r.out.Close()
		_ = os.Remove(r.out.Name())
	}
	if r.err != nil && code == 0 {
		code = 1
	}
	result := "ok"
	if code != 0 {
		result = "FAIL"
	}
	return code, fmt.Sprintf("=== olm suite: %s %s in %s (in a process of its own)", result, r.version, time.Since(r.start).Round(time.Second))
}

// childArgs are the test binary's arguments for a release's own process:
// all but the files go test reads back (the cache's test log, profiles),
// which one process writes.
func childArgs(args []string) []string {
	var out []string
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch name {
		case "test.testlogfile", "test.coverprofile", "test.cpuprofile", "test.memprofile",
			"test.blockprofile", "test.mutexprofile", "test.trace":
			continue
		}
		out = append(out, a)
	}
	return out
}

// runConcurrently runs releases[0] here and the others in processes of
// their own, at the same time, and returns the first failure's exit code.
func runConcurrently(m *testing.M, releases []olmRelease) int {
	// oria built once, before the runs share it (oriaproc's cache).
	if _, err := oriaproc.BuildCached(localcluster.RepoRoot()); err != nil {
		fmt.Fprintf(os.Stderr, "oria: %v\n", err)
		return 1
	}
	var runs []*releaseRun
	for _, r := range releases[1:] {
		fmt.Fprintf(os.Stderr, "=== olm suite: operator-controller and catalogd %s (%s), in a process of its own\n", r.version, r.dir)
		runs = append(runs, startRelease(r.version))
	}
	first := releases[0]
	fmt.Fprintf(os.Stderr, "=== olm suite: operator-controller and catalogd %s (%s)\n", first.version, first.dir)
	start := time.Now()
	code := runRelease(m, first)
	results := []string{fmt.Sprintf("=== olm suite: %s %s in %s", okOrFail(code), first.version, time.Since(start).Round(time.Second))}
	fmt.Fprintln(os.Stderr, results[0])
	for _, r := range runs {
		c, result := r.wait(os.Stdout)
		if code == 0 {
			code = c
		}
		results = append(results, result)
	}
	fmt.Fprintln(os.Stderr, strings.Join(results, "\n"))
	return code
}

func okOrFail(code int) string {
	if code == 0 {
		return "ok"
	}
	return "FAIL"
}

// TestReleaseRunResult: a release's process that fails fails the suite,
// and its output is passed on whole.
func TestReleaseRunResult(t *testing.T) {
	for _, c := range []struct {
		script string
		code   int
		result string
	}{
		{"echo ran; exit 0", 0, "=== olm suite: ok v9.9.9 in"},
		{"echo ran; exit 3", 3, "=== olm suite: FAIL v9.9.9 in"},
	} {
		out, err := os.CreateTemp(t.TempDir(), "out")
		if err != nil {
			t.Fatal(err)
		}
		r := &releaseRun{version: "v9.9.9", start: time.Now(), out: out, cmd: exec.Command("sh", "-c", c.script)}
		r.cmd.Stdout, r.cmd.Stderr = out, out
		r.err = r.cmd.Start()
		var got strings.Builder
		code, result := r.wait(&got)
		if code != c.code || !strings.HasPrefix(result, c.result) || got.String() != "ran\n" {
			t.Errorf("%q: code %d, result %q, output %q; want %d, %q..., \"ran\\n\"", c.script, code, result, got.String(), c.code, c.result)
		}
	}
	if code, _ := (&releaseRun{version: "v9.9.9", start: time.Now(), err: os.ErrNotExist}).wait(io.Discard); code == 0 {
		t.Error("a release whose process did not start passed")
	}
}

// TestChildArgs: a release's process gets the test flags but not the
// files that go test reads back from the first.
func TestChildArgs(t *testing.T) {
	got := childArgs([]string{"-test.v=true", "-test.testlogfile=/tmp/x", "-test.run=TestLegacy", "-test.coverprofile=/tmp/c", "-test.timeout=30m"})
	want := []string{"-test.v=true", "-test.run=TestLegacy", "-test.timeout=30m"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("childArgs = %q, want %q", got, want)
	}
}
