package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
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
	Extensions       int `json:"extensions"`
	CRDsPerExtension int `json:"crdsPerExtension"`
	Namespaces       int `json:"namespaces"`
	NewNamespaces    int `json:"newNamespaces"`
	ScaleInstances   int `json:"scaleInstances"`
	ScaleNamespaces  int `json:"scaleNamespaces"`
	// GuardNamespaces and GuardWrites are the guard scenario's sizes.
	GuardNamespaces int `json:"guardNamespaces,omitempty"`
	GuardWrites     int `json:"guardWrites,omitempty"`
	// ExpiryGrants, ExpiryNamespaces and ExpiryWaitSeconds are the expiry
	// scenario's sizes.
	ExpiryGrants      int `json:"expiryGrants,omitempty"`
	ExpiryNamespaces  int `json:"expiryNamespaces,omitempty"`
	ExpiryWaitSeconds int `json:"expiryWaitSeconds,omitempty"`
	IdleSeconds       int `json:"idleSeconds"`
	// QPS and Burst are oria's client limit; a negative QPS: none.
	QPS          float64  `json:"qps"`
	Burst        int      `json:"burst"`
	FloorWorkers int      `json:"floorWorkers"`
	FloorApply   bool     `json:"floorApply"`
	FloorWarmup  bool     `json:"floorWarmup"`
	Repeat       int      `json:"repeat"`
	Scenarios    []string `json:"scenarios"`
	OriaBinary   string   `json:"oriaBinary"`
	OriaArgs     []string `json:"oriaArgs,omitempty"`
	// AtSize are the sizes of the rows at size (issue 34; atsize.go).
	AtSize AtSizes `json:"atSize"`
}

// Result is one row of the table.
type Result struct {
	Name    string `json:"name"`
	Objects int    `json:"objects"` // objects oria had to create
	// Converged is false when oria did not reach the expected state in time.
	Converged bool   `json:"converged"`
	Error     string `json:"error,omitempty"`
	// Seconds is oria's convergence time; FloorSeconds the plain client's
	// time for the same objects without a client-side limit, and
	// QPSFloorSeconds at oria's QPS and burst (0: not measured; oria has no
	// limit, or -no-floor).
	Seconds         float64 `json:"seconds,omitempty"`
	FloorSeconds    float64 `json:"floorSeconds,omitempty"`
	QPSFloorSeconds float64 `json:"qpsFloorSeconds,omitempty"`
	// FloorWarmupSeconds is the untimed first run of the floor without a
	// client-side limit (-floor-warmup; see measureFloors).
	FloorWarmupSeconds float64 `json:"floorWarmupSeconds,omitempty"`
	// Rounds are every round's times when the row was measured in more
	// than one (-repeat); the row's own figures are the median round's
	// (see measureRounds).
	Rounds []Round `json:"rounds,omitempty"`
	// ApplyFloorSeconds is the floor from the user's apply (-apply-floor:
	// a few plain workers, cold, clocked from the same create of the
	// ScopeInstances through the guard as oria; applyfloor.go); Breakdown
	// is where the row's time went, oria's and that floor's.
	ApplyFloorSeconds float64    `json:"applyFloorSeconds,omitempty"`
	Breakdown         *Breakdown `json:"breakdown,omitempty"`
	// Runs are the restart scenario's runs of the row (restart.go), Sizing
	// a sizing row's measurements (sizing.go).
	Runs   []RestartRun `json:"runs,omitempty"`
	Sizing *SizingStep  `json:"sizing,omitempty"`
	// FirstSeconds is the time until oria's first object arrived: how long
	// oria takes to react, before its writes' throughput counts.
	FirstSeconds float64 `json:"firstSeconds,omitempty"`
	// BindingsSeconds (fanout-publish) is the time until the RoleBindings
	// existed; Seconds runs on until the ConfigMap listed every namespace.
	BindingsSeconds float64 `json:"bindingsSeconds,omitempty"`
	// RolesSeconds (extensions) is the time until the ClusterRoles existed;
	// Seconds runs on until every extension's condition reported them.
	RolesSeconds float64 `json:"rolesSeconds,omitempty"`
	// Latency is set for per-object latencies (new namespaces; the
	// guard's rows: the time of each write request).
	Latency *Latency `json:"latency,omitempty"`
	// Gate is the gated grant's figures (rows notbefore-large and
	// expiry-large; expiry_gate.go).
	Gate *GateFigures `json:"gate,omitempty"`
	// Writes are oria's write requests by verb during the scenario, Reads
	// its GET requests (gets, lists and watches).
	Writes      map[string]int `json:"writes"`
	WritesTotal int            `json:"writesTotal"`
	Reads       int            `json:"reads"`
	// Conflicts are the writes the API server refused with 409 Conflict.
	Conflicts int `json:"conflicts,omitempty"`
	// PeakRSS (bytes) and CPUSeconds are oria's; ControlPlaneCPUSeconds
	// are etcd's and kube-apiserver's, for context on a shared machine.
	PeakRSS                int64   `json:"peakRSSBytes"`
	CPUSeconds             float64 `json:"cpuSeconds"`
	ControlPlaneCPUSeconds float64 `json:"controlPlaneCPUSeconds"`
	// FloorControlPlaneCPUSeconds is etcd's and kube-apiserver's CPU while
	// the floor without a client-side limit ran: what the same objects
	// cost the server without oria.
	FloorControlPlaneCPUSeconds float64 `json:"floorControlPlaneCPUSeconds,omitempty"`
	// FloorCPUSeconds is the benchmark process's CPU meanwhile: the
	// floor's client, what oria's CPUSeconds compares with (it includes
	// the observer that times the floor).
	FloorCPUSeconds float64 `json:"floorCPUSeconds,omitempty"`
	WallSeconds     float64 `json:"wallSeconds"` // the scenario's whole window
}

// Ratio returns oria's time over the floor's without a client-side limit,
// 0 when either is unknown.
func (r *Result) Ratio() float64 { return ratio(r.Seconds, r.FloorSeconds) }

// QPSRatio returns oria's time over the floor's at oria's QPS and burst, 0
// when either is unknown.
func (r *Result) QPSRatio() float64 { return ratio(r.Seconds, r.QPSFloorSeconds) }

func ratio(t, floor float64) float64 {
	if t <= 0 || floor <= 0 {
		return 0
	}
	return t / floor
}

// Latency summarises per-object latencies in seconds.
type Latency struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of d.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func newLatency(d []time.Duration) *Latency {
	return &Latency{Count: len(d), P50: percentile(d, 50).Seconds(), P99: percentile(d, 99).Seconds(), Max: percentile(d, 100).Seconds()}
}

// render prints the report as two tables: figures, then targets.
func (r *Report) render(w io.Writer) error {
	c := r.Config
	fmt.Fprintf(w, "oria scale benchmark — %s — %d CPUs, commit %s\n", r.Started.UTC().Format(time.RFC3339), r.Host.CPUs, r.Host.Commit)
	method := "create"
	if c.FloorApply {
		method = "server-side apply"
	}
	fmt.Fprintf(w, "sizes: %d extensions x %d CRDs, %d namespaces (+%d new), scale %d x %d, guard %d namespaces x %d writes, expiry %d grants + 1 of %d namespaces (wait %ds), idle %ds; oria's client: %s; floor: %d workers, %s\n",
		c.Extensions, c.CRDsPerExtension, c.Namespaces, c.NewNamespaces, c.ScaleInstances, c.ScaleNamespaces, c.GuardNamespaces, c.GuardWrites,
		c.ExpiryGrants, c.ExpiryNamespaces, c.ExpiryWaitSeconds, c.IdleSeconds,
		fmtLimit(c.QPS, c.Burst), c.FloorWorkers, method)
	warm := ", timed cold"
	if c.FloorWarmup {
		warm = ", timed after an untimed warm-up run"
	}
	fmt.Fprintf(w, "floor: a plain client without a client-side limit%s; floor@qps: the same at oria's QPS and burst (\"-\" when oria has no limit)\n", warm)
	fmt.Fprintf(w, "rows with rounds (-repeat %d; scale: 1): oria's median round, and the floors' median\n\n", c.Repeat)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tobjects\toria\tfirst\tfloor\tratio\tfloor@qps\tratio@qps\tp50\tp99\tmax\twrites\treads (GET)\tpeak RSS\toria CPU\tapiserver+etcd CPU")
	for _, x := range r.Results {
		if x.Sizing != nil {
			continue // a table of its own (renderAtSize)
		}
		objects, conv, first, p50, p99, pmax := "-", "-", "-", "-", "-", "-"
		if x.Objects > 0 {
			objects = fmt.Sprint(x.Objects)
		}
		if x.Seconds > 0 {
			conv = fmtSeconds(x.Seconds)
		}
		if x.FirstSeconds > 0 {
			first = fmtSeconds(x.FirstSeconds)
		}
		switch {
		case !x.Converged && x.Error != "":
			conv = "TIMEOUT"
		case !x.Converged:
			conv = "stopped" // the run ended before this row finished
		}
		floor, ratio := fmtFloor(x, x.FloorSeconds, x.Ratio())
		qpsFloor, qpsRatio := fmtFloor(x, x.QPSFloorSeconds, x.QPSRatio())
		if l := x.Latency; l != nil && l.Count > 0 {
			p50, p99, pmax = fmtSeconds(l.P50), fmtSeconds(l.P99), fmtSeconds(l.Max)
		}
		cpu := fmt.Sprintf("%.1fs", x.CPUSeconds)
		if x.FloorCPUSeconds > 0 {
			cpu += fmt.Sprintf(" (floor %.1fs)", x.FloorCPUSeconds)
		}
		cp := fmt.Sprintf("%.1fs", x.ControlPlaneCPUSeconds)
		if x.FloorControlPlaneCPUSeconds > 0 {
			cp += fmt.Sprintf(" (floor %.1fs)", x.FloorControlPlaneCPUSeconds)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n",
			x.Name, objects, conv, first, floor, ratio, qpsFloor, qpsRatio, p50, p99, pmax, fmtWrites(x), x.Reads,
			fmtMB(x.PeakRSS), cpu, cp)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := r.renderAtSize(w); err != nil {
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

// fmtFloor shows a floor's time and oria's ratio to it, "-" when unknown.
func fmtFloor(x *Result, seconds, ratio float64) (string, string) {
	f, r := "-", "-"
	if seconds > 0 {
		f = fmtSeconds(seconds)
	}
	if x.Converged && ratio > 0 {
		r = fmt.Sprintf("%.2f", ratio)
	}
	return f, r
}

// fmtLimit shows a client-side rate limit.
func fmtLimit(qps float64, burst int) string {
	if qps < 0 {
		return "no client-side limit"
	}
	return fmt.Sprintf("qps %g, burst %d", qps, burst)
}

// fmtWrites shows the total, the non-zero verbs and the refused writes:
// "4020 (PATCH 4000, POST 20; 12 got 409)".
func fmtWrites(x *Result) string {
	var parts []string
	for _, v := range writeVerbs {
		if n := x.Writes[v]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", v, n))
		}
	}
	detail := strings.Join(parts, ", ")
	if x.Conflicts > 0 {
		detail += fmt.Sprintf("; %d got 409", x.Conflicts)
	}
	if detail == "" {
		return fmt.Sprint(x.WritesTotal)
	}
	return fmt.Sprintf("%d (%s)", x.WritesTotal, detail)
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
