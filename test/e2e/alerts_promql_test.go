package e2e

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
)

// This file does in-process, with Prometheus' own packages, what
// `promtool check rules` and `promtool test rules` do (cmd/promtool/main.go
// and unittest.go of the Prometheus version in go.mod), for one rules file
// and one test group of alert_rule_test cases: no promtool to build.

// promParser is promtool's PromQL parser without --enable-feature.
var promParser = parser.NewParser(parser.Options{})

// checkRules is `promtool check rules` with its default lint
// (duplicate-rules), the lint made an error: the file is read strictly (no
// unknown fields), every group and rule validated, every expression parsed,
// every label and annotation template parsed (rulefmt.ParseFile), and no two
// rules have the same name and labels.
func checkRules(path string) []error {
	groups, errs := rulefmt.ParseFile(path, false, model.UTF8Validation, promParser, promslog.NewNopLogger())
	if errs != nil {
		return errs
	}
	seen := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			name := cmp.Or(r.Alert, r.Record)
			key := name + rules.FromMaps(g.Labels, r.Labels).String()
			if seen[key] {
				errs = append(errs, fmt.Errorf("duplicate rule: %s", key))
			}
			seen[key] = true
		}
	}
	return errs
}

// alertCheck is one alert_rule_test case: at eval_time at (from the start
// of the input series), the alerting rules named alert fire with exactly
// want (labels without alertname, which is added, and annotations, both
// compared exactly; pending alerts are not firing).
type alertCheck struct {
	at    time.Duration
	alert string
	want  []firing
}

// firing is one firing alert's labels and annotations.
type firing struct {
	labels, annotations map[string]string
}

// inputLine is one input_series entry: a series in PromQL notation and its
// values in promtool's expanding notation ("1 2 _ 3x4", one per interval).
type inputLine struct {
	series, values string
}

// testRules is `promtool test rules` for a test file of rule_files:
// [rulesPath], evaluation_interval and the test group's interval both
// interval, input_series input and alert_rule_test checks: the groups of
// rulesPath are loaded by a rule manager and evaluated from time 0 every
// interval on storage filled with the input series up to each evaluation,
// and at each check's time the firing alerts are compared with the
// expected ones. It returns promtool's failures: a rule evaluation error
// (which ends the run), each check whose alerts differ.
func testRules(rulesPath string, interval time.Duration, input []inputLine, checks []alertCheck) (errs []error) {
	var load strings.Builder
	fmt.Fprintf(&load, "load %s\n", model.Duration(interval))
	for _, s := range input {
		fmt.Fprintf(&load, "  %s %s\n", s.series, s.values)
	}
	suite, err := promqltest.NewLazyLoader(load.String(), promqltest.LazyLoaderOpts{EnableAtModifier: true, EnableNegativeOffset: true})
	if err != nil {
		return []error{err}
	}
	defer func() {
		if err := suite.Close(); err != nil {
			errs = append(errs, err)
		}
	}()
	suite.SubqueryInterval = interval

	m := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:  rules.EngineQueryFunc(suite.QueryEngine(), suite.Storage()),
		Appendable: suite.Storage(),
		Context:    context.Background(),
		NotifyFunc: func(context.Context, string, ...*rules.Alert) {},
		Logger:     promslog.NewNopLogger(),
		Parser:     promParser,
	})
	loaded, errs := m.LoadGroups(interval, labels.EmptyLabels(), "", nil, false, rulesPath)
	if errs != nil {
		return errs
	}
	// promtool orders groups only by group_eval_order (none here): any
	// order; by name, here.
	groups := slices.SortedFunc(func(yield func(*rules.Group) bool) {
		for _, g := range loaded {
			if !yield(g) {
				return
			}
		}
	}, func(a, b *rules.Group) int { return strings.Compare(a.Name(), b.Name()) })
	for _, g := range groups {
		for _, r := range g.Rules() {
			if ar, ok := r.(*rules.AlertingRule); ok {
				ar.SetRestored(true) // so that the ALERTS series is written, as promtool does
			}
		}
	}

	checks = slices.Clone(checks)
	slices.SortStableFunc(checks, func(a, b alertCheck) int { return cmp.Compare(a.at, b.at) })
	var maxt time.Duration
	for _, c := range checks {
		maxt = max(maxt, c.at)
	}
	start := time.Unix(0, 0).UTC()
	next := 0 // the first check not made yet
	for ts := start; !ts.After(start.Add(maxt)); ts = ts.Add(interval) {
		var evalErrs []error
		suite.WithSamplesTill(ts, func(err error) {
			if err != nil {
				errs = append(errs, err)
				return
			}
			for _, g := range groups {
				g.Eval(suite.Context(), ts)
				for _, r := range g.Rules() {
					if err := r.LastError(); err != nil {
						evalErrs = append(evalErrs, fmt.Errorf("rule: %s, time: %s, err: %w", r.Name(), ts.Sub(start), err))
					}
				}
			}
		})
		if errs = append(errs, evalErrs...); len(evalErrs) > 0 {
			return errs
		}
		// A check at ts <= at < ts+interval is made on the evaluation at ts.
		for ; next < len(checks) && checks[next].at < ts.Add(interval).Sub(start); next++ {
			c := checks[next]
			got := firingAlerts(groups, c.alert)
			want := make([]firing, 0, len(c.want))
			for _, w := range c.want {
				l := map[string]string{labels.AlertName: c.alert}
				for k, v := range w.labels {
					l[k] = v
				}
				want = append(want, firing{labels: l, annotations: w.annotations})
			}
			if g, w := firingString(got), firingString(want); g != w {
				errs = append(errs, fmt.Errorf("alertname: %s, time: %s,\n  exp: %s\n  got: %s", c.alert, model.Duration(c.at), w, g))
			}
		}
	}
	return errs
}

// firingAlerts is what the alerting rules named alert, in all groups, fire.
func firingAlerts(groups []*rules.Group, alert string) []firing {
	var out []firing
	for _, g := range groups {
		for _, r := range g.Rules() {
			ar, ok := r.(*rules.AlertingRule)
			if !ok || ar.Name() != alert {
				continue
			}
			for _, a := range ar.ActiveAlerts() {
				if a.State == rules.StateFiring {
					out = append(out, firing{labels: a.Labels.Map(), annotations: a.Annotations.Map()})
				}
			}
		}
	}
	return out
}

// firingString writes alerts in a canonical form (each alert's labels and
// annotations as Prometheus writes label sets, the alerts sorted), so that
// two lists compare exactly as promtool compares them.
func firingString(alerts []firing) string {
	s := make([]string, 0, len(alerts))
	for _, a := range alerts {
		s = append(s, "labels:"+labels.FromMap(a.labels).String()+" annotations:"+labels.FromMap(a.annotations).String())
	}
	slices.Sort(s)
	return "[" + strings.Join(s, ", ") + "]"
}
