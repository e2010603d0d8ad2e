package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixedScrape is a /metrics body of oria: the given gauge and counter lines
// (without # TYPE; oria_write_errors_total a counter, the others gauges)
// and a namespace binding latency histogram with fast observations of at
// most 0.1 s and slow ones between 5 s and 10 s.
func fixedScrape(fast, slow int, lines ...string) string {
	var b strings.Builder
	typed := map[string]bool{}
	for _, l := range lines {
		name, _, _ := strings.Cut(l, "{")
		name, _, _ = strings.Cut(name, " ")
		if !typed[name] {
			typed[name] = true
			kind := "gauge"
			if strings.HasSuffix(name, "_total") {
				kind = "counter"
			}
			fmt.Fprintf(&b, "# TYPE %s %s\n", name, kind)
		}
		b.WriteString(l + "\n")
	}
	h := "oria_namespace_binding_latency_seconds"
	fmt.Fprintf(&b, "# TYPE %s histogram\n", h)
	for _, le := range []string{"0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "30", "60", "300", "+Inf"} {
		n := fast
		switch le {
		case "0.01", "0.025", "0.05":
			n = 0
		case "10", "30", "60", "300", "+Inf":
			n = fast + slow
		}
		fmt.Fprintf(&b, "%s_bucket{le=%q} %d\n", h, le, n)
	}
	fmt.Fprintf(&b, "%s_sum %g\n%s_count %d\n", h, 0.08*float64(fast)+7*float64(slow), h, fast+slow)
	return b.String()
}

// fixedScenario is a scenario of scrapes written by hand, and the alerts
// that fire at each: healthy twice; every alert's state reached (the
// standing ones pending; write errors since the scrape before and slow
// namespace bindings firing); the states standing (firing; the errors and
// latencies standing still); healthy.
func fixedScenario() ([]string, []alerts) {
	healthy := []string{
		`oria_conflicts{kind="ClusterExtension"} 0`,
		`oria_objects_by_ready_reason{kind="ScopeInstance",reason="Bound",status="True"} 3`,
		`oria_objects_by_ready_reason{kind="ClusterExtension",reason="Unmanaged",status="False"} 2`,
		`oria_objects_by_ready_reason{kind="ScopeInstance",reason="Pending",status="False"} 1`,
	}
	bad := append(slices.Clone(healthy[1:]),
		`oria_conflicts{kind="ClusterExtension"} 1`,
		`oria_conflicts{kind="ScopeTemplate"} 2`,
		`oria_objects_by_ready_reason{kind="ScopeInstance",reason="NamespaceNotFound",status="False"} 2`,
		`oria_objects_by_ready_reason{kind="RBACPolicy",reason="TemplateNotFound",status="False"} 1`,
		`oria_objects_by_ready_reason{kind="ScopeInstance",reason="Forbidden",status="False"} 1`,
		`oria_objects_by_ready_reason{kind="RBACPolicy",reason="InvalidSpec",status="False"} 1`,
		`oria_objects_by_ready_reason{kind="ClusterExtension",reason="BundleRoleTooBroad",status="False"} 1`,
		`oria_write_errors_total{kind="RoleBinding",reason="Forbidden"} 4`,
		`oria_objects_by_ready_reason{kind="RBACPolicy",reason="Eligible",status="False"} 1`,
		`oria_access_request_oldest_pending_seconds 2400`,
	)
	scrapes := []string{
		fixedScrape(10, 0, healthy...),
		fixedScrape(12, 0, healthy...),
		fixedScrape(12, 50, bad...),
		fixedScrape(12, 50, bad...),
		fixedScrape(20, 50, append(healthy, `oria_write_errors_total{kind="RoleBinding",reason="Forbidden"} 4`)...),
	}
	standing := alerts{
		"OriaConflict":              {{"kind": "ClusterExtension"}, {"kind": "ScopeTemplate"}},
		"OriaGrantIncomplete":       {{"kind": "ScopeInstance", "reason": "NamespaceNotFound"}, {"kind": "RBACPolicy", "reason": "TemplateNotFound"}},
		"OriaBindingsBeyondCeiling": {{"kind": "ScopeInstance"}},
		"OriaNotReady":              {{"kind": "RBACPolicy", "reason": "InvalidSpec"}},
		"OriaExtensionNotManaged":   {{"reason": "BundleRoleTooBroad"}},
		"OriaAccessRequestPending":  {{}},
	}
	reached := alerts{
		"OriaWriteErrors":          {{"kind": "RoleBinding", "reason": "Forbidden"}},
		"OriaSlowNamespaceBinding": {{}},
	}
	return scrapes, []alerts{nil, {}, reached, standing, {}}
}

// TestExampleAlertsFixed runs the example alerts through the in-process
// promtool checks on scrapes written by hand (no cluster: it runs with
// -short too), every alert firing once; and makes sure that those checks
// fail on a wrong expectation (an alert missing, one too many), a wrong
// expression (it fires on other values, or with other labels), an invalid
// expression or template, a duplicate rule and an unknown field.
func TestExampleAlertsFixed(t *testing.T) {
	rules := alertRules(t)
	scrapes, want := fixedScenario()
	requireAlerts(t, rules, scrapes, want)

	t.Run("wrong expectations fail", func(t *testing.T) {
		missing := alerts{}
		for k, v := range want[3] {
			missing[k] = v
		}
		missing["OriaConflict"] = missing["OriaConflict"][:1]
		errs, _ := checkAlerts(t, rules, scrapes, []alerts{nil, {}, want[2], missing, {}})
		require.Len(t, errs, 1)
		assert.ErrorContains(t, errs[0], "alertname: OriaConflict, time: 1h35m")

		extra := alerts{"OriaWriteErrors": want[2]["OriaWriteErrors"]}
		errs, _ = checkAlerts(t, rules, scrapes, []alerts{nil, {}, want[2], want[3], extra})
		require.Len(t, errs, 1)
		assert.ErrorContains(t, errs[0], "alertname: OriaWriteErrors, time: 2h5m")
	})

	b, err := os.ReadFile(rules)
	require.NoError(t, err)
	for _, c := range []struct{ name, old, new, fails string }{
		{"a wrong expression fails", "max by (kind) (oria_conflicts) > 0", "max by (kind) (oria_conflicts) > 1", "alertname: OriaConflict, time: 1h35m"},
		{"a wrong label fails", `sum by (kind) (oria_objects_by_ready_reason{status="False", reason="Forbidden"})`, `sum by (kind, reason) (oria_objects_by_ready_reason{status="False", reason="Forbidden"})`, "alertname: OriaBindingsBeyondCeiling, time: 1h35m"},
		{"an invalid expression fails", "max by (kind) (oria_conflicts) > 0", "max by (kind) (oria_conflicts > 0", "parse error"},
		{"an invalid template fails", "summary: A name oria needs", "summary: '{{ .Labels.kind A name oria needs'", "template"},
		{"a duplicate rule fails", "alert: OriaNotReady", "alert: OriaConflict", "duplicate rule: OriaConflict"},
		{"an unknown field fails", "for: 15m", "fore: 15m", "field fore not found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Contains(t, string(b), c.old)
			path := filepath.Join(t.TempDir(), "rules.yaml")
			require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(b), c.old, c.new, 1)), 0o644))
			errs, _ := checkAlerts(t, path, scrapes, want)
			require.NotEmpty(t, errs)
			var all strings.Builder
			for _, e := range errs {
				all.WriteString(e.Error() + "\n")
			}
			assert.Contains(t, all.String(), c.fails)
		})
	}
}
