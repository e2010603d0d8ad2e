package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// Targets of issue 6 (see docs/benchmarks.md).
const (
	targetRatio      = 1.5         // convergence / floor
	minFloorSeconds  = 1.0         // the ratio target applies from this floor up
	targetP99        = time.Second // new-namespace latency
	targetRSSBytes   = 150 << 20   // peak RSS at the memory size
	memoryExtensions = 200         // the memory target's size:
	memoryCRDs       = 5           // E x C CRDs
	memoryNamespaces = 5000        // and N namespaces
	targetRSSLabel   = "peak RSS at 200x5 CRDs + 5,000 namespaces"
)

// Report is what a run measured; it is printed as a table and written as
// JSON.
type Report struct {
	Started  time.Time `json:"started"`
	Host     Host      `json:"host"`
	Config   Sizes     `json:"config"`
	Results  []*Result `json:"results"`
	Targets  []Target  `json:"targets"`
	PeakRSS  int64     `json:"peakRSSBytes"` // over the whole run
	Warnings []string  `json:"warnings,omitempty"`
}

// Host describes the machine, because figures only compare on the same one.
type Host struct {
	CPUs      int    `json:"cpus"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"goVersion"`
	Commit    string `json:"commit"`
}

// Sizes are the benchmark's parameters.
type Sizes struct {
	Extensions       int      `json:"extensions"`
	CRDsPerExtension int      `json:"crdsPerExtension"`
	Namespaces       int      `json:"namespaces"`
	NewNamespaces    int      `json:"newNamespaces"`
	IdleSeconds      int      `json:"idleSeconds"`
	QPS              float64  `json:"qps"`
	Burst            int      `json:"burst"`
	FloorWorkers     int      `json:"floorWorkers"`
	FloorApply       bool     `json:"floorApply"`
	Scenarios        []string `json:"scenarios"`
	OriaBinary       string   `json:"oriaBinary"`
	OriaArgs         []string `json:"oriaArgs,omitempty"`
}

// Result is one row of the table.
type Result struct {
	Name    string `json:"name"`
	Objects int    `json:"objects"` // objects oria had to create
	// Converged is false when oria did not reach the expected state in time.
	Converged bool   `json:"converged"`
	Error     string `json:"error,omitempty"`
	// Seconds is oria's convergence time; FloorSeconds the plain client's
	// time for the same objects (0: not measured).
	Seconds      float64 `json:"seconds,omitempty"`
	FloorSeconds float64 `json:"floorSeconds,omitempty"`
	// Latency is set for per-object latencies (new namespaces).
	Latency *Latency `json:"latency,omitempty"`
	// Writes are oria's write requests by verb during the scenario, Reads
	// its GET/LIST/WATCH requests.
	Writes      map[string]int `json:"writes"`
	WritesTotal int            `json:"writesTotal"`
	Reads       int            `json:"reads"`
	// PeakRSS (bytes) and CPUSeconds are oria's; ControlPlaneCPUSeconds
	// are etcd's and kube-apiserver's, for context on a shared machine.
	PeakRSS                int64   `json:"peakRSSBytes"`
	CPUSeconds             float64 `json:"cpuSeconds"`
	ControlPlaneCPUSeconds float64 `json:"controlPlaneCPUSeconds"`
	// FloorControlPlaneCPUSeconds is etcd's and kube-apiserver's CPU while
	// the floor ran: what the same objects cost the server without oria.
	FloorControlPlaneCPUSeconds float64 `json:"floorControlPlaneCPUSeconds,omitempty"`
	WallSeconds                 float64 `json:"wallSeconds"` // the scenario's whole window
}

// Ratio returns oria's time over the floor's, 0 when either is unknown.
func (r *Result) Ratio() float64 {
	if r.Seconds <= 0 || r.FloorSeconds <= 0 {
		return 0
	}
	return r.Seconds / r.FloorSeconds
}

// Latency summarises per-object latencies in seconds.
type Latency struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

func newLatency(d []time.Duration) *Latency {
	return &Latency{Count: len(d), P50: percentile(d, 50).Seconds(), P99: percentile(d, 99).Seconds(), Max: percentile(d, 100).Seconds()}
}

// Target is one pass/fail line. Pass is nil when the target does not apply
// to this run's sizes or was not measured.
type Target struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Pass *bool  `json:"pass"`
}

func (t Target) verdict() string {
	switch {
	case t.Pass == nil:
		return "n/a"
	case *t.Pass:
		return "PASS"
	default:
		return "FAIL"
	}
}

func (r *Report) result(name string) *Result {
	for _, x := range r.Results {
		if x.Name == name {
			return x
		}
	}
	return nil
}

// evaluate computes the targets from the results.
func (r *Report) evaluate() {
	r.Targets = nil
	add := func(name, want, got string, pass *bool) {
		r.Targets = append(r.Targets, Target{Name: name, Want: want, Got: got, Pass: pass})
	}
	for _, name := range []string{scenarioExtensions, scenarioFanout} {
		x := r.result(name)
		if x == nil {
			continue
		}
		label := name + " convergence / floor"
		switch {
		case !x.Converged:
			add(label, fmt.Sprintf("<= %.1f", targetRatio), "did not converge", ptr(false))
		case x.Ratio() == 0:
			add(label, fmt.Sprintf("<= %.1f", targetRatio), "no floor", nil)
		case x.FloorSeconds < minFloorSeconds:
			// A floor this short measures latency (watch delivery, a
			// reconcile's start), not throughput: -quick sizes.
			add(label, fmt.Sprintf("<= %.1f", targetRatio), fmt.Sprintf("%.2f (floor < %.0fs)", x.Ratio(), minFloorSeconds), nil)
		default:
			add(label, fmt.Sprintf("<= %.1f", targetRatio), fmt.Sprintf("%.2f", x.Ratio()), ptr(x.Ratio() <= targetRatio))
		}
	}
	if x := r.result(scenarioNewNamespaces); x != nil {
		label := fmt.Sprintf("new-namespace p99 (N=%d)", r.Config.Namespaces)
		switch {
		case !x.Converged || x.Latency == nil:
			add(label, "< 1s", "did not converge", ptr(false))
		default:
			var pass *bool
			if r.Config.Namespaces >= 2000 { // the target is stated at N = 2,000
				pass = ptr(x.Latency.P99 < targetP99.Seconds())
			}
			add(label, "< 1s", fmtSeconds(x.Latency.P99), pass)
		}
	}
	if x := r.result(scenarioIdle); x != nil {
		got := fmt.Sprintf("%d", x.WritesTotal)
		if !x.Converged {
			got = "not measured"
		}
		add(fmt.Sprintf("idle writes (%ds)", r.Config.IdleSeconds), "0", got, ptr(x.Converged && x.WritesTotal == 0))
	}
	var pass *bool
	if r.Config.Extensions >= memoryExtensions && r.Config.CRDsPerExtension >= memoryCRDs &&
		r.Config.Namespaces >= memoryNamespaces && r.result(scenarioExtensions) != nil && r.result(scenarioFanout) != nil {
		pass = ptr(r.PeakRSS < targetRSSBytes)
	}
	add(targetRSSLabel, "< 150 MB", fmtMB(r.PeakRSS), pass)
}

// failedTargets counts the targets that apply and failed.
func (r *Report) failedTargets() int {
	n := 0
	for _, t := range r.Targets {
		if t.Pass != nil && !*t.Pass {
			n++
		}
	}
	return n
}

// converged reports whether every scenario converged.
func (r *Report) converged() bool {
	for _, x := range r.Results {
		if !x.Converged {
			return false
		}
	}
	return true
}

// render prints the report as two tables: figures, then targets.
func (r *Report) render(w io.Writer) error {
	c := r.Config
	fmt.Fprintf(w, "oria scale benchmark — %s — %d CPUs, commit %s\n", r.Started.UTC().Format(time.RFC3339), r.Host.CPUs, r.Host.Commit)
	method := "create"
	if c.FloorApply {
		method = "server-side apply"
	}
	fmt.Fprintf(w, "sizes: %d extensions x %d CRDs, %d namespaces (+%d new), idle %ds; qps %g, burst %d; floor: %d workers, %s\n\n",
		c.Extensions, c.CRDsPerExtension, c.Namespaces, c.NewNamespaces, c.IdleSeconds, c.QPS, c.Burst, c.FloorWorkers, method)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tobjects\toria\tfloor\tratio\tp50\tp99\tmax\twrites\treads\tpeak RSS\toria CPU\tapiserver+etcd CPU")
	for _, x := range r.Results {
		objects, conv, floor, ratio, p50, p99, pmax := "-", "-", "-", "-", "-", "-", "-"
		if x.Objects > 0 {
			objects = fmt.Sprint(x.Objects)
		}
		if x.Seconds > 0 {
			conv = fmtSeconds(x.Seconds)
		}
		switch {
		case !x.Converged && x.Error != "":
			conv = "TIMEOUT"
		case !x.Converged:
			conv = "stopped" // the run ended before this row finished
		}
		if x.FloorSeconds > 0 {
			floor = fmtSeconds(x.FloorSeconds)
		}
		if x.Converged && x.Ratio() > 0 {
			ratio = fmt.Sprintf("%.2f", x.Ratio())
		}
		if l := x.Latency; l != nil && l.Count > 0 {
			p50, p99, pmax = fmtSeconds(l.P50), fmtSeconds(l.P99), fmtSeconds(l.Max)
		}
		cp := fmt.Sprintf("%.1fs", x.ControlPlaneCPUSeconds)
		if x.FloorControlPlaneCPUSeconds > 0 {
			cp += fmt.Sprintf(" (floor %.1fs)", x.FloorControlPlaneCPUSeconds)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%.1fs\t%s\n",
			x.Name, objects, conv, floor, ratio, p50, p99, pmax, fmtWrites(x), x.Reads,
			fmtMB(x.PeakRSS), x.CPUSeconds, cp)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "target\twant\tgot\tresult")
	for _, t := range r.Targets {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Want, t.Got, t.verdict())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, x := range r.Results {
		if x.Error != "" {
			fmt.Fprintf(w, "\n%s: %s", x.Name, x.Error)
		}
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "\nwarning: %s", warn)
	}
	if len(r.Warnings) > 0 || !r.converged() {
		fmt.Fprintln(w)
	}
	return nil
}

// fmtWrites shows the total and the non-zero verbs: "4020 (PATCH 4000, POST 20)".
func fmtWrites(x *Result) string {
	var parts []string
	for _, v := range writeVerbs {
		if n := x.Writes[v]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", v, n))
		}
	}
	if len(parts) == 0 {
		return fmt.Sprint(x.WritesTotal)
	}
	return fmt.Sprintf("%d (%s)", x.WritesTotal, strings.Join(parts, ", "))
}

func fmtSeconds(s float64) string {
	switch {
	case s < 1:
		return fmt.Sprintf("%.0fms", s*1000)
	case s < 100:
		return fmt.Sprintf("%.2fs", s)
	default:
		return fmt.Sprintf("%.0fs", s)
	}
}

func fmtMB(b int64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f MB", float64(b)/(1<<20))
}

// save writes the report as JSON to dir/results-<time>.json and
// dir/latest.json and returns the first path.
func (r *Report) save(dir string) (string, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	b = append(b, '\n')
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "results-"+r.Started.UTC().Format("20060102T150405Z")+".json")
	for _, p := range []string{path, filepath.Join(dir, "latest.json")} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return "", err
		}
	}
	return path, nil
}

func ptr[T any](v T) *T { return &v }
