package cli

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func TestReport(t *testing.T) {
	u, err := Report("AccessReport", AccessReport{Extension: "argocd", Access: []AccessRow{
		{Subject: "User bob", Namespace: "team-a", API: "applications.argoproj.io", Level: LevelView, Verbs: []string{"get", "list", "watch"}, Via: []string{"x"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"apiVersion": ReportAPIVersion,
		"kind":       "AccessReport",
		"extension":  "argocd",
		"apis":       nil,
		"access": []any{map[string]any{
			"subject": "User bob", "namespace": "team-a", "api": "applications.argoproj.io", "level": "view",
			"verbs": []any{"get", "list", "watch"}, "via": []any{"x"},
		}},
	}
	if d := cmp.Diff(want, u.Object); d != "" {
		t.Errorf("Report (-want +got):\n%s", d)
	}
}

func TestOutput(t *testing.T) {
	rows := []AccessRow{{Subject: "User bob", Namespace: "team-a", API: "applications.argoproj.io", Level: LevelPartial, Verbs: []string{"list"}, Via: []string{"a", "b"}}}
	for _, tc := range []struct {
		format string
		want   string
	}{
		{"", "NAMESPACE   SUBJECT    API                        ACCESS           VIA\nteam-a      User bob   applications.argoproj.io   partial (list)   a; b\n"},
		{"jsonpath={.access[0].level}", "partial"},
		{"yaml", "access:\n- api: applications.argoproj.io\n  level: partial\n  namespace: team-a\n  subject: User bob\n  verbs:\n  - list\n  via:\n  - a\n  - b\napiVersion: cli.oria.operatorframework.io/v1alpha1\napis: null\nextension: argocd\nkind: AccessReport\n"},
	} {
		t.Run(tc.format, func(t *testing.T) {
			pf := printFlags()
			*pf.OutputFormat = tc.format
			var out bytes.Buffer
			err := output(pf, genericiooptions.IOStreams{Out: &out}, view{table: AccessTable(rows), kind: "AccessReport", body: AccessReport{Extension: "argocd", Access: rows}})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, out.String()); d != "" {
				t.Errorf("output -o %q (-want +got):\n%s", tc.format, d)
			}
		})
	}
}
