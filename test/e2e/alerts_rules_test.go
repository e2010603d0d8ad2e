package e2e

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// block is how many one-minute samples of input series one scrape stands
// for; alerts are evaluated evalOffset minutes into a block.
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

// inputSeries turns scrapes into input series: scrape k's value for samples
// [k*block, (k+1)*block), missing ("_") where a scrape lacks the series.
func inputSeries(t require.TestingT, scrapes []string) []inputLine {
	parsed := make([]map[string]float64, len(scrapes))
	all := map[string]bool{}
	for i, s := range scrapes {
		parsed[i] = parseScrape(t, s)
		for k := range parsed[i] {
			all[k] = true
		}
	}
	var out []inputLine
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
		out = append(out, inputLine{series: name, values: strings.Join(values, " ")})
	}
	return out
}

// checkAlerts checks the rules file as `promtool check rules` does, then
// runs the rule unit tests of `promtool test rules` on the scrapes (see
// alerts_promql_test.go): at evalOffset minutes into the block of scrape k,
// for every alerting rule, exactly want[k][alert] fire (each with the
// rule's labels and annotations). want[0] is not checked (no scrape before
// it). It returns the failures, and the number of checks made.
func checkAlerts(t require.TestingT, rules string, scrapes []string, want []alerts) ([]error, int) {
	require.Len(t, want, len(scrapes))
	if errs := checkRules(rules); errs != nil {
		return append([]error{fmt.Errorf("checking %s", rules)}, errs...), 0
	}
	rs := rulesOf(t, rules)
	for k := range want {
		for name := range want[k] {
			require.True(t, slices.ContainsFunc(rs, func(r alertRule) bool { return r.Alert == name }), "no alert %s in the rules", name)
		}
	}
	var checks []alertCheck
	for k := 1; k < len(scrapes); k++ {
		for _, r := range rs {
			if r.Alert == "" {
				continue // a recording rule
			}
			c := alertCheck{at: time.Duration(k*block+evalOffset) * time.Minute, alert: r.Alert}
			for _, labels := range want[k][r.Alert] {
				l := maps.Clone(r.Labels)
				if l == nil {
					l = map[string]string{}
				}
				maps.Copy(l, labels)
				c.want = append(c.want, firing{labels: l, annotations: r.Annotations})
			}
			checks = append(checks, c)
		}
	}
	return testRules(rules, time.Minute, inputSeries(t, scrapes), checks), len(checks)
}

// requireAlerts is checkAlerts that fails the test on a failure, keeping
// the input series in the temporary directory to look at.
func requireAlerts(t *testing.T, rules string, scrapes []string, want []alerts) {
	t.Helper()
	errs, n := checkAlerts(t, rules, scrapes, want)
	if errs != nil {
		var b strings.Builder
		for _, s := range inputSeries(t, scrapes) {
			fmt.Fprintf(&b, "%s %s\n", s.series, s.values)
		}
		keep := filepath.Join(os.TempDir(), "oria-alerts-series.txt")
		_ = os.WriteFile(keep, []byte(b.String()), 0o644)
		t.Fatalf("the example alerts (input series kept in %s):\n%v", keep, errors.Join(errs...))
	}
	t.Logf("example alerts: %d scrapes, %d checks passed", len(scrapes), n)
}
