package e2e

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// block is how many one-minute samples of promtool input series one scrape
// stands for; alerts are evaluated evalOffset minutes into a block.
const (
	block      = 30
	evalOffset = 5
)

// parseScrape reads a /metrics body into oria's series, each named as
// PromQL selects it (name{label="value",...}, labels sorted), a histogram
// as its _bucket (with le), _count and _sum series.
func parseScrape(t require.TestingT, body string) map[string]float64 {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(body))
	require.NoError(t, err)
	out := map[string]float64{}
	for name, f := range families {
		if !strings.HasPrefix(name, "oria_") {
			continue
		}
		for _, m := range f.GetMetric() {
			switch {
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					le := &dto.LabelPair{Name: new("le"), Value: new(strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64))}
					out[series(name+"_bucket", append(slices.Clone(m.GetLabel()), le))] = float64(b.GetCumulativeCount())
				}
				inf := &dto.LabelPair{Name: new("le"), Value: new("+Inf")}
				out[series(name+"_bucket", append(slices.Clone(m.GetLabel()), inf))] = float64(h.GetSampleCount())
				out[series(name+"_count", m.GetLabel())] = float64(h.GetSampleCount())
				out[series(name+"_sum", m.GetLabel())] = h.GetSampleSum()
			case m.GetCounter() != nil:
				out[series(name, m.GetLabel())] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[series(name, m.GetLabel())] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// inputSeries turns scrapes into promtool input series: scrape k's value
// for samples [k*block, (k+1)*block), missing ("_") where a scrape lacks the
// series.
func inputSeries(t *testing.T, scrapes []string) []map[string]string {
	t.Helper()
	parsed := make([]map[string]float64, len(scrapes))
	all := map[string]bool{}
	for i, s := range scrapes {
		parsed[i] = parseScrape(t, s)
		for k := range parsed[i] {
			all[k] = true
		}
	}
	var out []map[string]string
	for _, name := range slices.Sorted(maps.Keys(all)) {
		var values []string
		for _, p := range parsed {
			v, ok := p[name]
			token := "_"
			if ok {
				token = strconv.FormatFloat(v, 'f', -1, 64)
			}
			for range block {
				values = append(values, token)
			}
		}
		out = append(out, map[string]string{"series": name, "values": strings.Join(values, " ")})
	}
	return out
}

// runPromtool checks the rules file with promtool, then runs promtool's
// rule unit tests on the scrapes: at evalOffset minutes into the block of
// scrape k, for every alerting rule, exactly want[k][alert] fire (each with
// the rule's labels and annotations). want[0] is not checked (no scrape
// before it).
func runPromtool(t *testing.T, promtool, rules string, scrapes []string, want []alerts) {
	t.Helper()
	require.Len(t, want, len(scrapes))
	out, err := exec.Command(promtool, "check", "rules", rules).CombinedOutput()
	require.NoError(t, err, "promtool check rules:\n%s", out)

	rs := rulesOf(t, rules)
	for k := range want {
		for name := range want[k] {
			require.True(t, slices.ContainsFunc(rs, func(r alertRule) bool { return r.Alert == name }), "no alert %s in the rules", name)
		}
	}
	var checks []map[string]any
	for k := 1; k < len(scrapes); k++ {
		for _, r := range rs {
			exp := []map[string]any{}
			for _, labels := range want[k][r.Alert] {
				l := maps.Clone(r.Labels)
				maps.Copy(l, labels)
				exp = append(exp, map[string]any{"exp_labels": l, "exp_annotations": r.Annotations})
			}
			checks = append(checks, map[string]any{
				"eval_time": fmt.Sprintf("%dm", k*block+evalOffset), "alertname": r.Alert, "exp_alerts": exp,
			})
		}
	}
	test := map[string]any{
		"rule_files":          []string{rules},
		"evaluation_interval": "1m",
		"tests": []map[string]any{{
			"interval":        "1m",
			"input_series":    inputSeries(t, scrapes),
			"alert_rule_test": checks,
		}},
	}
	b, err := yaml.Marshal(test)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "oria-alerts-test.yaml")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	out, err = exec.Command(promtool, "test", "rules", path).CombinedOutput()
	if err != nil {
		keep := filepath.Join(os.TempDir(), "oria-alerts-test.yaml")
		_ = os.WriteFile(keep, b, 0o644)
		t.Fatalf("promtool test rules (input kept in %s):\n%s", keep, out)
	}
	t.Logf("promtool test rules: %d scrapes, %d checks: %s", len(scrapes), len(checks), strings.TrimSpace(string(out)))
}
