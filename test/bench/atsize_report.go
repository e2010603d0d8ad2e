package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Targets of issue 34 (see docs/benchmarks.md).
const (
	// targetLimitShare bounds oria's peak RSS against the memory limit
	// config/manager ships, from limitObjects bindings up (scale rows) and
	// in the restart rows.
	targetLimitShare = 0.90
	limitObjects     = 50000
	// targetRestart bounds the restart's time to "all reconciled" (the
	// slowest of its runs) with restartTarget* in place.
	targetRestart            = 30 * time.Second
	restartTargetBindings    = 100000
	restartTargetExtensions  = 1000
	restartTargetPolicies    = 2000
	targetRestartWritesLabel = "0"
)

// fanoutRows are the rows measured against the floor from the apply.
var fanoutRows = []string{scenarioFanout, scenarioFanoutPublish, scenarioScale}

// restartRows are the restart scenario's rows.
var restartRows = []string{scenarioRestart, scenarioTakeoverKill, scenarioTakeoverStop}

// evaluateAtSize adds issue 34's targets: the fan-out rows against the
// floor from the apply, oria's peak memory against the shipped limit, the
// restart rows' writes and time.
func (r *Report) evaluateAtSize(add func(name, want, got string, pass *bool)) {
	a := r.Config.AtSize
	for _, name := range fanoutRows {
		if x := r.result(name); x != nil && x.ApplyFloorSeconds > 0 {
			got, pass := applyRatioTarget(x)
			add(fmt.Sprintf("%s convergence / floor from the apply (%d workers, cold)", name, a.ApplyFloorWorkers), fmt.Sprintf("<= %.2f", targetRatio), got, pass)
		}
	}
	if a.MemoryLimitBytes > 0 {
		limit := int64(float64(a.MemoryLimitBytes) * targetLimitShare)
		want := fmt.Sprintf("<= %.0f %% of %s = %s", targetLimitShare*100, fmtMiB(a.MemoryLimitBytes), fmtMB(limit))
		for _, name := range append([]string{scenarioScale}, restartRows...) {
			x := r.result(name)
			if x == nil || x.PeakRSS == 0 {
				continue
			}
			var pass *bool
			if x.Converged && (x.Objects >= limitObjects || name != scenarioScale) {
				pass = ptr(x.PeakRSS <= limit)
			}
			add(fmt.Sprintf("%s peak RSS (%d bindings) / oria's memory limit (%s)", name, x.Objects, a.MemoryLimit), want,
				fmt.Sprintf("%s (%.0f %%)", fmtMB(x.PeakRSS), 100*float64(x.PeakRSS)/float64(a.MemoryLimitBytes)), pass)
		}
	}
	for _, name := range restartRows {
		x := r.result(name)
		if x == nil {
			continue
		}
		got := fmt.Sprint(x.WritesTotal)
		if !x.Converged {
			got = "not measured"
		}
		add(fmt.Sprintf("%s writes (%d runs: oria's engine, and API changes)", name, len(x.Runs)), targetRestartWritesLabel, got, ptr(x.Converged && x.WritesTotal == 0))
		label := fmt.Sprintf("%s: all reconciled, p50 / max of %d runs (%d bindings)", name, a.RestartRuns, x.Objects)
		switch {
		case !x.Converged || x.Latency == nil:
			want := "measured"
			if name == scenarioRestart {
				want = "max < " + fmtSeconds(targetRestart.Seconds())
			}
			add(label, want, "did not finish", ptr(false))
		case name == scenarioRestart:
			var pass *bool
			if x.Objects >= restartTargetBindings && a.RestartExtensions >= restartTargetExtensions && a.RestartPolicies >= restartTargetPolicies {
				pass = ptr(x.Latency.Max < targetRestart.Seconds())
			}
			add(label, "max < "+fmtSeconds(targetRestart.Seconds()), fmtSeconds(x.Latency.P50)+" / "+fmtSeconds(x.Latency.Max), pass)
		default:
			add(label, "measured", fmtSeconds(x.Latency.P50)+" / "+fmtSeconds(x.Latency.Max), nil)
		}
	}
}

// applyRatioTarget evaluates a row against the floor from the apply, as
// ratioTarget against the warmed floor.
func applyRatioTarget(x *Result) (string, *bool) {
	switch {
	case !x.Converged:
		return "did not converge", ptr(false)
	case x.ApplyRatio() == 0:
		return "no floor", nil
	case x.ApplyFloorSeconds < minFloorSeconds:
		return fmt.Sprintf("%.2f (floor < %.0fs)", x.ApplyRatio(), minFloorSeconds), nil
	default:
		return fmt.Sprintf("%.2f", x.ApplyRatio()), ptr(x.ApplyRatio() <= targetRatio)
	}
}

// renderAtSize prints, after the main table, oria's memory limit, the
// fan-out rows against both floors with where their time went, and the
// restart rows' runs.
func (r *Report) renderAtSize(w io.Writer) error {
	a := r.Config.AtSize
	if a.MemoryLimitBytes > 0 {
		gomem := "GOMEMLIMIT given in the environment"
		if a.GoMemLimitBytes > 0 {
			gomem = fmt.Sprintf("GOMEMLIMIT %s (%d %%, as installed)", fmtMiB(a.GoMemLimitBytes), goMemLimitPercent)
		}
		fmt.Fprintf(w, "\noria's memory limit: %s (-memory-limit=%s), %s\n", fmtMiB(a.MemoryLimitBytes), a.MemoryLimit, gomem)
	}
	var fan, restart, sizing []*Result
	for _, x := range r.Results {
		if x.Breakdown != nil || x.ApplyFloorSeconds > 0 {
			fan = append(fan, x)
		}
		if len(x.Runs) > 0 {
			restart = append(restart, x)
		}
		if x.Sizing != nil && x.Converged {
			sizing = append(sizing, x)
		}
	}
	if len(fan) > 0 {
		fmt.Fprintf(w, "\nfan-out against both floors, and where the time goes (seconds from the user's apply, median rounds)\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "scenario\toria\tfloor (warmed)\tratio\tfloor from the apply (cold)\tratio\toria: admitted / first / last binding\tfloor from the apply: admitted / first / last answered / last seen")
		for _, x := range fan {
			floor, rat := fmtFloor(x, x.FloorSeconds, x.Ratio())
			af, arat := fmtFloor(x, x.ApplyFloorSeconds, x.ApplyRatio())
			var oria, fl string
			if x.Breakdown != nil {
				oria, fl = fmtPhases(x.Breakdown.Oria), fmtPhases(x.Breakdown.ApplyFloor)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", x.Name, fmtSeconds(x.Seconds), floor, rat, af, arat, oria, fl)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(restart) > 0 {
		fmt.Fprintf(w, "\nrestart and takeover: seconds from the signal to the leader (or oria) to \"all reconciled\" (oria's first full pass done for every kind), per run\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "scenario\trun\tall reconciled\tprocess gone\tready / leading\tpass (oria's own)\tengine writes\tAPI changes\tpeak RSS")
		for _, x := range restart {
			for i, run := range x.Runs {
				up := run.Ready
				if run.Leading > 0 {
					up = run.Leading
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", x.Name, i+1, fmtSeconds(run.Seconds), fmtSeconds(run.Stopped),
					fmtSeconds(up), fmtSeconds(run.PassSeconds), run.EngineWrites, fmtCounts(run.Changes), fmtMB(run.PeakRSS))
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(sizing) > 0 {
		fmt.Fprintf(w, "\nsizing: oria's live heap after a forced collection, and its RSS, before and after each of two steps\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "scenario\twhat\tadded per step\tlive heap\tper object (second step)\tRSS")
		for _, x := range sizing {
			z := x.Sizing
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s / %s / %s\t%.0f bytes\t%s / %s / %s\n", x.Name, z.What, z.Added,
				fmtMB(z.HeapBytes[0]), fmtMB(z.HeapBytes[1]), fmtMB(z.HeapBytes[2]), z.PerObject(),
				fmtMB(z.RSSBytes[0]), fmtMB(z.RSSBytes[1]), fmtMB(z.RSSBytes[2]))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// fmtPhases shows a fan-out's moments: "12ms / 40ms / 1.45s", with the
// floor's last create answered before the last seen.
func fmtPhases(p *Phases) string {
	if p == nil {
		return "-"
	}
	s := fmtSeconds(p.Admitted) + " / " + fmtSeconds(p.First)
	if p.Answered > 0 {
		s += " / " + fmtSeconds(p.Answered)
	}
	return s + " / " + fmtSeconds(p.Last)
}

// fmtMiB shows bytes in MiB, as Kubernetes quantities are written.
func fmtMiB(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
