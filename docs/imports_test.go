package docs

import (
	"os/exec"
	"strings"
	"testing"
)

// writers are oria's packages that write to the API server: the engine (the
// one writer) and every package that imports it. The SubjectAccessReviews
// of authz are questions, not writes.
func writers(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, line := range goList(t, "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "../...") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		for _, imp := range fields {
			if imp == module+"/internal/engine" {
				out[fields[0]] = true
			}
		}
	}
	out[module+"/internal/engine"] = true
	return out
}

const module = "github.com/operator-framework/oria"

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// TestGuardImportsNothingThatWrites (issue 41): the escalation guard judges
// writes; it imports no package that makes them, so no change to a writer
// can change what the guard admits by accident.
func TestGuardImportsNothingThatWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	w := writers(t)
	if len(w) < 3 {
		t.Fatalf("found %d writing packages; the scan is broken", len(w))
	}
	for _, dep := range goList(t, "-deps", "../internal/admission") {
		if w[dep] {
			t.Errorf("internal/admission depends on %s, which writes to the API server (it is or imports internal/engine)", dep)
		}
	}
}
