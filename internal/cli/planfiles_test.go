package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tmpl := func(name string) string {
		return "apiVersion: oria.operatorframework.io/v1alpha1\nkind: ScopeTemplate\nmetadata: {name: " + name + "}\nspec: {clusterRoles: [{name: view}]}\n"
	}
	write("a.yaml", tmpl("a")+"---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\n")
	write("b.json", `{"apiVersion": "oria.operatorframework.io/v1alpha1", "kind": "ScopeInstance", "metadata": {"name": "b"}, "spec": {"scopeTemplateName": "a"}}`)
	write("notes.txt", "not read in a directory")
	write("sub/c.yml", tmpl("c"))
	single := write("other/d.manifest", tmpl("d"))
	empty := write("empty/e.yaml", "# nothing\n")

	names := func(files Files, stdin string) (string, error) {
		objs, skipped, err := ReadFiles(files, strings.NewReader(stdin))
		var out []string
		for _, o := range objs {
			out = append(out, o.GetName())
		}
		for _, s := range skipped {
			out = append(out, "skipped "+s.Kind+" "+s.Name+" ("+filepath.Base(s.Source)+")")
		}
		return strings.Join(out, ", "), err
	}
	for _, tc := range []struct {
		name  string
		files Files
		stdin string
		want  string
		err   string
	}{
		{name: "a directory: its .yaml, .yml and .json files, not its subdirectories", files: Files{Names: []string{dir}},
			want: "a, b, skipped Deployment shop/web (a.yaml)"},
		{name: "-R: the subdirectories too", files: Files{Names: []string{dir}, Recursive: true},
			want: "a, b, c, skipped Deployment shop/web (a.yaml)"},
		{name: "a named file, whatever its extension", files: Files{Names: []string{single}}, want: "d"},
		{name: "several -f, and standard input", files: Files{Names: []string{single, "-"}}, stdin: tmpl("in"), want: "d, in"},
		{name: "no object at all", files: Files{Names: []string{empty}}, err: "no object in " + empty},
		{name: "a missing file", files: Files{Names: []string{filepath.Join(dir, "nope.yaml")}}, err: "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := names(tc.files, tc.stdin)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("ReadFiles (-want +got):\n%s", d)
			}
		})
	}
}

func TestPlanHeaderSkipped(t *testing.T) {
	skipped := []SkippedObject{{Kind: "Deployment", Name: "shop/web", Source: "a.yaml", Reason: "not one of oria's kinds"}}
	got := PlanHeader(&PlanReport{Skipped: skipped})
	want := "Skipped Deployment shop/web (a.yaml): not one of oria's kinds\nNothing to plan: no RBACPolicy, ScopeTemplate or ScopeInstance.\n"
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("PlanHeader (-want +got):\n%s", d)
	}
	got = PlanHeader(&PlanReport{Skipped: skipped, Objects: []PlannedObject{{Kind: "RBACPolicy", Name: "p", Operation: ActionCreate}}})
	want = "Skipped Deployment shop/web (a.yaml): not one of oria's kinds\n\nRBACPolicy p (create): REFUSED: \n\n0 to create, 0 to update, 0 to delete, 0 unchanged\n"
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("PlanHeader (-want +got):\n%s", d)
	}
}
