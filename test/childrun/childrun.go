// Package childrun runs some of a test binary's tests in a second process
// of the same binary, beside the first: each process starts a control
// plane of its own, and most of an end-to-end run is waiting (on a
// recheck, an install, a window's edge), so two processes on two cores
// take little longer than one. The second process's output follows the
// first's, whole, as if its tests had run after them; its failure fails
// the first process. test/olm runs its second OLM release so, test/e2e
// the second part of its tests.
package childrun

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Run is a run of this test binary in a process of its own.
type Run struct {
	label string
	cmd   *exec.Cmd
	out   *os.File
	start time.Time
	err   error
}

// Start runs this test binary again, with its arguments (Args) followed by
// extra and with env added to its environment, its output into a
// temporary file. label names the run in its result line.
func Start(label string, env []string, extra ...string) *Run {
	r := &Run{label: label, start: time.Now()}
	if r.out, r.err = os.CreateTemp("", "oria-childrun-*.out"); r.err != nil {
		return r
	}
	r.cmd = exec.Command(os.Args[0], append(Args(os.Args[1:]), extra...)...)
	r.cmd.Env = append(os.Environ(), env...)
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	// Not beyond this process, even when it is killed (a timeout).
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	r.err = r.cmd.Start()
	return r
}

// Wait waits for the run to end, copies its output to w and returns its
// exit code (not 0 when it could not start) and its result line.
func (r *Run) Wait(w io.Writer) (int, string) {
	code := 1
	if r.err == nil && r.cmd != nil {
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
	return code, fmt.Sprintf("=== %s: %s in %s (in a process of its own)", r.label, Result(code), time.Since(r.start).Round(time.Second))
}

// Result is "ok" for the exit code 0, "FAIL" for any other.
func Result(code int) string {
	if code == 0 {
		return "ok"
	}
	return "FAIL"
}

// Args are a test binary's arguments for a process of its own: all but the
// files go test reads back (the cache's test log, profiles), which one
// process writes.
func Args(args []string) []string {
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
