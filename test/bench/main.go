// Command bench is oria's scale benchmark (`make bench`, docs/benchmarks.md).
// It starts the local control plane, runs the oria binary as a separate
// process, drives the scenarios (extensions, fan-out, idle), measures
// convergence against a plain client's floor, oria's API writes, memory and
// CPU, and prints a table of figures and targets, also written as JSON
// under .bench/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/metadata"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/manager"
	"github.com/operator-framework/oria/test/localcluster"
	"github.com/operator-framework/oria/test/oriaproc"
)

// config is the parsed command line.
type config struct {
	extensions, crds, namespaces, newNamespaces, idleSeconds int
	qps                                                      float64
	burst, floorWorkers, schemaKB                            int
	scenarios                                                []string
	timeout                                                  time.Duration
	noFloor, floorApply, failOnTarget, profile               bool
	oriaBin, outDir                                          string
	oriaArgs                                                 []string
}

// quickPreset are the sizes of -quick, applied to the flags not given
// explicitly.
var quickPreset = map[string]string{
	"extensions": "20", "crds-per-extension": "5", "namespaces": "200", "new-namespaces": "20", "idle-seconds": "15",
}

func parseFlags(args []string, out io.Writer) (*config, error) {
	c := &config{}
	root := localcluster.RepoRoot()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.IntVar(&c.extensions, "extensions", 200, "Scenario 1: number of ClusterExtensions (E).")
	fs.IntVar(&c.crds, "crds-per-extension", 5, "Scenario 1: CRDs per extension (C); oria creates 4*E*C ClusterRoles.")
	fs.IntVar(&c.schemaKB, "schema-kb", 100, "Size of each CRD's openAPI schema in KB.")
	fs.IntVar(&c.namespaces, "namespaces", 2000, "Scenario 2: namespaces the ScopeInstance selects (N).")
	fs.IntVar(&c.newNamespaces, "new-namespaces", 100, "Scenario 2: new namespaces created one by one after convergence (M).")
	fs.IntVar(&c.idleSeconds, "idle-seconds", 120, "Scenario 3: seconds to count oria's writes with nothing changing (T).")
	fs.Float64Var(&c.qps, "qps", 500, "Client QPS of oria (--kube-api-qps) and of the floor client.")
	fs.IntVar(&c.burst, "burst", 1000, "Client burst of oria (--kube-api-burst) and of the floor client.")
	fs.IntVar(&c.floorWorkers, "floor-workers", 32, "Parallel workers of the floor client.")
	fs.BoolVar(&c.noFloor, "no-floor", false, "Skip the floor measurements.")
	fs.BoolVar(&c.floorApply, "floor-apply", false, "The floor writes with server-side apply, as oria does, instead of create.")
	scen := fs.String("scenarios", "all", "Comma-separated scenarios to run: extensions, fanout, idle, or all.")
	quick := fs.Bool("quick", false, "Small sizes for a fast run: -extensions=20 -crds-per-extension=5 -namespaces=200 -new-namespaces=20 -idle-seconds=15 (explicit flags win).")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Minute, "Bound on each wait: convergence, and the settling of the cluster before a timed phase.")
	fs.BoolVar(&c.failOnTarget, "fail-on-target", false, "Exit non-zero when a target is missed (always non-zero when a scenario does not converge).")
	fs.BoolVar(&c.profile, "profile", false, "Save oria's CPU (first 30 s) and heap profiles of each scenario under the output folder.")
	fs.StringVar(&c.oriaBin, "oria", filepath.Join(root, "bin", "oria"), "The oria binary (make build).")
	fs.StringVar(&c.outDir, "out", filepath.Join(root, ".bench"), "Output folder for results, oria's log and profiles.")
	oriaArgs := fs.String("oria-args", "", "Extra space-separated flags for oria, e.g. --max-concurrent-reconciles=8.")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if *quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, v := range quickPreset {
			if !set[name] {
				if err := fs.Set(name, v); err != nil {
					return nil, err
				}
			}
		}
	}
	c.oriaArgs = strings.Fields(*oriaArgs)
	for _, s := range strings.Split(*scen, ",") {
		s = strings.TrimSpace(s)
		switch {
		case s == "all":
			for _, x := range scenarios {
				c.scenarios = append(c.scenarios, x.name)
			}
		case slices.ContainsFunc(scenarios, func(x scenario) bool { return x.name == s }):
			c.scenarios = append(c.scenarios, s)
		default:
			return nil, fmt.Errorf("invalid -scenarios %q: unknown scenario %q (want extensions, fanout, idle or all)", *scen, s)
		}
	}
	for name, v := range map[string]int{
		"extensions": c.extensions, "crds-per-extension": c.crds, "namespaces": c.namespaces,
		"floor-workers": c.floorWorkers, "schema-kb": c.schemaKB, "burst": c.burst,
	} {
		if v < 1 {
			return nil, fmt.Errorf("invalid -%s %d: must be at least 1", name, v)
		}
	}
	if c.newNamespaces < 0 || c.idleSeconds < 0 || c.qps <= 0 {
		return nil, errors.New("-new-namespaces and -idle-seconds must be >= 0, -qps > 0")
	}
	return c, nil
}

func main() {
	os.Exit(run(os.Args[1:]))
}

// run returns the exit code: 0 when every scenario converged (and, with
// -fail-on-target, every target passed), 1 otherwise, 2 for bad flags.
func run(args []string) int {
	cfg, err := parseFlags(args, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 2
	}
	// The first Ctrl-C cancels the run, which then cleans up; a second one
	// kills it.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	defer stop()

	report := &Report{Started: time.Now(), Host: host(), Config: Sizes{
		Extensions: cfg.extensions, CRDsPerExtension: cfg.crds, Namespaces: cfg.namespaces, NewNamespaces: cfg.newNamespaces,
		IdleSeconds: cfg.idleSeconds, QPS: cfg.qps, Burst: cfg.burst, FloorWorkers: cfg.floorWorkers, FloorApply: cfg.floorApply,
		Scenarios: cfg.scenarios, OriaBinary: cfg.oriaBin, OriaArgs: cfg.oriaArgs,
	}}
	start := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	runErr := execute(ctx, cfg, report, logf)
	if runErr != nil {
		report.Warnings = append(report.Warnings, "run stopped: "+runErr.Error())
		logf("error: %v", runErr)
	}
	report.evaluate()
	fmt.Println()
	if err := report.render(os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
	}
	if path, err := report.save(cfg.outDir); err != nil {
		fmt.Fprintf(os.Stderr, "bench: saving results: %v\n", err)
	} else {
		fmt.Printf("\nresults: %s (and %s)\n", path, filepath.Join(cfg.outDir, "latest.json"))
	}
	switch {
	case runErr != nil || !report.converged():
		return 1
	case cfg.failOnTarget && report.failedTargets() > 0:
		return 1
	}
	return 0
}

// execute starts the control plane and oria, runs the scenarios and always
// stops both.
func execute(ctx context.Context, cfg *config, report *Report, logf func(string, ...any)) (retErr error) {
	if _, err := os.Stat(cfg.oriaBin); err != nil {
		return fmt.Errorf("oria binary: %w (run make build)", err)
	}
	if err := os.MkdirAll(cfg.outDir, 0o755); err != nil {
		return err
	}
	logf("starting the local control plane")
	// The escalation guard is on, as in a real cluster: every write of an
	// oria object (the benchmark's and oria's own) goes through it.
	cluster, err := localcluster.Start(ctx, localcluster.Options{Webhook: true})
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	defer func() {
		logf("stopping the control plane")
		retErr = errors.Join(retErr, cluster.Stop())
	}()
	scheme, err := manager.Scheme()
	if err != nil {
		return err
	}
	admin, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	md, err := metadata.NewForConfig(cluster.Config)
	if err != nil {
		return err
	}

	args := append([]string{
		fmt.Sprintf("--kube-api-qps=%g", cfg.qps), fmt.Sprintf("--kube-api-burst=%d", cfg.burst),
	}, append(cluster.OriaFlags(), cfg.oriaArgs...)...)
	logPath := filepath.Join(cfg.outDir, "oria.log")
	logf("starting %s %s (log: %s)", cfg.oriaBin, strings.Join(args, " "), logPath)
	oria, err := startOria(ctx, cfg, cluster.Kubeconfig, logPath, args...)
	if err != nil {
		return err
	}
	defer func() {
		logf("stopping oria")
		oria.Stop()
	}()

	b := &bench{
		cfg: cfg, admin: admin, md: md, oria: oria, report: report, logf: logf,
		mem:    newSampler(ctx, oria.Pid(), 100*time.Millisecond),
		cpPIDs: childPIDs("etcd", "kube-apiserver"),
	}
	if !cfg.noFloor {
		if b.floor, err = newFloor(cluster.Config, cfg.qps, cfg.burst, cfg.floorWorkers, cfg.timeout, cfg.floorApply); err != nil {
			return err
		}
	}
	defer func() { report.PeakRSS = b.mem.overallPeak() }()
	for _, s := range scenarios {
		if !slices.Contains(cfg.scenarios, s.name) {
			continue
		}
		logf("scenario %s", s.name)
		if err := s.run(b, ctx); err != nil {
			return fmt.Errorf("scenario %s: %w", s.name, err)
		}
	}
	if oria.Exited() {
		return errors.New("oria exited during the run; see " + logPath)
	}
	return nil
}

// oriaProcess is the oria binary running against the local control plane,
// with what the benchmark reads from it.
type oriaProcess struct {
	*oriaproc.Process
	metrics   metrics
	outDir    string
	profile   bool
	profiling chan struct{} // one CPU profile at a time
}

func startOria(ctx context.Context, cfg *config, kubeconfig, logPath string, args ...string) (*oriaProcess, error) {
	proc, err := oriaproc.Start(ctx, cfg.oriaBin, kubeconfig, logPath, args...)
	if err != nil {
		return nil, err
	}
	return &oriaProcess{
		Process:   proc,
		metrics:   metrics{url: proc.MetricsURL, client: &http.Client{Timeout: 10 * time.Second}},
		outDir:    cfg.outDir,
		profile:   cfg.profile,
		profiling: make(chan struct{}, 1),
	}, nil
}

// startCPUProfile saves a 30 s CPU profile of the scenario in the
// background (with -profile; skipped while another one runs).
func (p *oriaProcess) startCPUProfile(ctx context.Context, name string) {
	if !p.profile {
		return
	}
	select {
	case p.profiling <- struct{}{}:
	default:
		return
	}
	go func() {
		defer func() { <-p.profiling }()
		_ = p.saveProfile(ctx, "profile?seconds=30", name+"-cpu.pb.gz", 45*time.Second)
	}()
}

// saveHeapProfile saves a heap profile at the end of a scenario (-profile).
func (p *oriaProcess) saveHeapProfile(ctx context.Context, name string) {
	if p.profile {
		_ = p.saveProfile(ctx, "heap", name+"-heap.pb.gz", 30*time.Second)
	}
}

func (p *oriaProcess) saveProfile(ctx context.Context, query, file string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.PprofURL+"/"+query, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("pprof %s: %s", query, resp.Status)
	}
	dir := filepath.Join(p.outDir, "profiles")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, file))
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

// host describes the machine for the report.
func host() Host {
	h := Host{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	cmd := exec.Command("git", "describe", "--always", "--dirty")
	cmd.Dir = localcluster.RepoRoot()
	if out, err := cmd.Output(); err == nil {
		h.Commit = strings.TrimSpace(string(out))
	}
	return h
}
