package childrun

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRunResult: a second process that fails fails the run, and its output
// is passed on whole.
func TestRunResult(t *testing.T) {
	for _, c := range []struct {
		script string
		code   int
		result string
	}{
		{"echo ran; exit 0", 0, "=== second: ok in"},
		{"echo ran; exit 3", 3, "=== second: FAIL in"},
	} {
		out, err := os.CreateTemp(t.TempDir(), "out")
		if err != nil {
			t.Fatal(err)
		}
		r := &Run{label: "second", start: time.Now(), out: out, cmd: exec.Command("sh", "-c", c.script)}
		r.cmd.Stdout, r.cmd.Stderr = out, out
		r.err = r.cmd.Start()
		var got strings.Builder
		code, result := r.Wait(&got)
		if code != c.code || !strings.HasPrefix(result, c.result) || got.String() != "ran\n" {
			t.Errorf("%q: code %d, result %q, output %q; want %d, %q..., \"ran\\n\"", c.script, code, result, got.String(), c.code, c.result)
		}
	}
	if code, _ := (&Run{label: "second", start: time.Now(), err: os.ErrNotExist}).Wait(io.Discard); code == 0 {
		t.Error("a process that did not start passed")
	}
}

// TestArgs: a second process gets the test flags but not the files that
// go test reads back from the first.
func TestArgs(t *testing.T) {
	got := Args([]string{"-test.v=true", "-test.testlogfile=/tmp/x", "-test.run=TestLegacy", "-test.coverprofile=/tmp/c", "-test.timeout=30m"})
	want := []string{"-test.v=true", "-test.run=TestLegacy", "-test.timeout=30m"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Args = %q, want %q", got, want)
	}
}
