// Command bench is oria's scale benchmark (`make bench`, docs/benchmarks.md).
// It starts the local control plane, runs the oria binary as a separate
// process with its default flags, drives the scenarios (extensions, fan-out,
// scale, idle), measures convergence against a plain client's floor (without
// a client-side limit, and at oria's limit when it has one), oria's API
// requests, memory and CPU, and prints a table of figures and targets, also
// written as JSON under .bench/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/manager"
	"github.com/operator-framework/oria/test/localcluster"
)

// config is the parsed command line.
type config struct {
	extensions, crds, namespaces, newNamespaces, idleSeconds int
	scaleInstances, scaleNamespaces                          int
	guardNamespaces, guardWrites                             int
	expiryGrants, expiryNamespaces, expiryWaitSeconds        int
	// qps and burst are oria's client limit (a negative qps: none);
	// oriaLimit is set when -qps or -burst was given, and oria then gets
	// them as flags (else it runs with its defaults, which they equal).
	qps                                        float64
	burst, floorWorkers, schemaKB              int
	profileSeconds, repeat                     int
	oriaLimit                                  bool
	scenarios                                  []string
	timeout                                    time.Duration
	noFloor, floorApply, failOnTarget, profile bool
	floorWarmup                                bool
	oriaBin, outDir                            string
	oriaArgs                                   []string
	// at are the rows at size (atsize.go).
	at AtSizes
}

// quickPreset are the sizes of -quick, applied to the flags not given
// explicitly.
var quickPreset = map[string]string{
	"extensions": "20", "crds-per-extension": "5", "namespaces": "200", "new-namespaces": "20", "idle-seconds": "15",
	"scale-namespaces": "500", "expiry-namespaces": "200", "expiry-wait-seconds": "10",
}

func parseFlags(args []string, out io.Writer) (*config, error) {
	c := &config{}
	root := localcluster.RepoRoot()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.IntVar(&c.extensions, "extensions", 200, "Scenario 1: number of ClusterExtensions (E).")
	fs.IntVar(&c.crds, "crds-per-extension", 5, "Scenario 1: CRDs per extension (C); oria creates 4*E*C ClusterRoles.")
	fs.IntVar(&c.schemaKB, "schema-kb", 100, "Size of each CRD's openAPI schema in KB.")
	fs.IntVar(&c.namespaces, "namespaces", 2000, "Scenarios fanout and fanout-publish: namespaces the ScopeInstance selects (N).")
	fs.IntVar(&c.newNamespaces, "new-namespaces", 100, "Scenario 2: new namespaces created one by one after convergence (M).")
	fs.IntVar(&c.idleSeconds, "idle-seconds", 120, "Idle scenario: seconds to count oria's writes with nothing changing (T).")
	fs.IntVar(&c.scaleInstances, "scale-instances", 10, "Scenario scale: ScopeInstances (I), each selecting the same namespaces.")
	fs.IntVar(&c.scaleNamespaces, "scale-namespaces", 5000, "Scenario scale: namespaces (oria creates I x this many RoleBindings).")
	fs.IntVar(&c.guardNamespaces, "guard-namespaces", 100, "Scenario guard: namespaces the delegated user's ScopeInstance lists.")
	fs.IntVar(&c.guardWrites, "guard-writes", 50, "Scenario guard: timed writes of each object, with the guard on and with it off.")
	fs.IntVar(&c.expiryGrants, "expiry-grants", 100, "Scenario expiry: time-bound grants of one namespace each, expiring together with the large one.")
	fs.IntVar(&c.expiryNamespaces, "expiry-namespaces", 2000, "Scenario expiry: namespaces of the large time-bound grant.")
	fs.IntVar(&c.expiryWaitSeconds, "expiry-wait-seconds", 30, "Scenario expiry: seconds to count oria's writes while the grants wait for an expiry an hour away.")
	fs.Float64Var(&c.qps, "qps", manager.DefaultKubeAPIQPS,
		"oria's --kube-api-qps (default: oria's, -1 = no client-side limit); a positive value is also measured as a second floor.")
	fs.IntVar(&c.burst, "burst", manager.DefaultKubeAPIBurst, "oria's --kube-api-burst (default: oria's), for a positive -qps.")
	fs.IntVar(&c.floorWorkers, "floor-workers", 32, "Parallel workers of the floor client.")
	fs.BoolVar(&c.noFloor, "no-floor", false, "Skip the floor measurements.")
	fs.IntVar(&c.repeat, "repeat", 5, "Rounds of the extensions, fanout and fanout-publish rows (floor, then oria, each round); a row shows the median round. The scale row runs once.")
	fs.BoolVar(&c.floorWarmup, "floor-warmup", true, "Run the floor without a client-side limit once, untimed, before timing it, so that it starts like oria's phase: right after the row's objects were created and deleted once.")
	fs.BoolVar(&c.floorApply, "floor-apply", false, "The floor writes with server-side apply, as oria does, instead of create.")
	scen := fs.String("scenarios", "all", "Comma-separated scenarios to run: extensions, fanout, fanout-publish, scale, guard, expiry, restart, sizing, idle; all = extensions, fanout, fanout-publish, expiry, idle.")
	quick := fs.Bool("quick", false, "Small sizes for a fast run: -extensions=20 -crds-per-extension=5 -namespaces=200 -new-namespaces=20 -idle-seconds=15 -scale-namespaces=500 -expiry-namespaces=200 -expiry-wait-seconds=10 (explicit flags win).")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Minute, "Bound on each wait: convergence, and the settling of the cluster before a timed phase.")
	fs.BoolVar(&c.failOnTarget, "fail-on-target", false, "Exit non-zero when a target is missed (always non-zero when a scenario does not converge).")
	fs.BoolVar(&c.profile, "profile", false, "Save oria's CPU and heap profiles of each scenario, and the kube-apiserver's CPU and heap profiles of each timed phase (floors included), under the output folder.")
	fs.IntVar(&c.profileSeconds, "profile-seconds", 10, "Length of the CPU profiles (-profile), from the start of each timed phase.")
	fs.StringVar(&c.oriaBin, "oria", filepath.Join(root, "bin", "oria"), "The oria binary (make build).")
	fs.StringVar(&c.outDir, "out", filepath.Join(root, ".bench"), "Output folder for results, oria's log and profiles.")
	oriaArgs := fs.String("oria-args", "", "Extra space-separated flags for oria, e.g. --max-concurrent-reconciles=8.")
	c.at.register(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	c.oriaLimit = set["qps"] || set["burst"]
	if *quick {
		for _, preset := range []map[string]string{quickPreset, atSizeQuick} {
			for name, v := range preset {
				if !set[name] {
					if err := fs.Set(name, v); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	c.oriaArgs = strings.Fields(*oriaArgs)
	var err error
	if c.scenarios, err = parseScenarios(*scen); err != nil {
		return nil, err
	}
	for name, v := range map[string]int{
		"extensions": c.extensions, "crds-per-extension": c.crds, "namespaces": c.namespaces,
		"floor-workers": c.floorWorkers, "schema-kb": c.schemaKB, "burst": c.burst,
		"scale-instances": c.scaleInstances, "scale-namespaces": c.scaleNamespaces, "repeat": c.repeat,
		"guard-namespaces": c.guardNamespaces, "guard-writes": c.guardWrites,
		"expiry-grants": c.expiryGrants, "expiry-namespaces": c.expiryNamespaces,
	} {
		if v < 1 {
			return nil, fmt.Errorf("invalid -%s %d: must be at least 1", name, v)
		}
	}
	if c.newNamespaces < 0 || c.idleSeconds < 0 || c.expiryWaitSeconds < 0 || c.qps == 0 {
		return nil, errors.New("-new-namespaces, -idle-seconds and -expiry-wait-seconds must be >= 0, -qps > 0 or -1 (no client-side limit)")
	}
	if c.qps < 0 {
		c.qps = manager.NoClientRateLimit
	}
	if err := c.at.check(root); err != nil {
		return nil, err
	}
	return c, nil
}

// parseScenarios returns the scenarios named in the -scenarios value, in
// their running order and each once.
func parseScenarios(value string) ([]string, error) {
	want := map[string]bool{}
	for _, s := range strings.Split(value, ",") {
		s = strings.TrimSpace(s)
		switch {
		case s == "all":
			for _, x := range scenarios {
				want[x.name] = want[x.name] || x.inAll
			}
		case slices.ContainsFunc(scenarios, func(x scenario) bool { return x.name == s }):
			want[s] = true
		default:
			return nil, fmt.Errorf("invalid -scenarios %q: unknown scenario %q (want extensions, fanout, fanout-publish, scale, guard, expiry, restart, sizing, idle or all)", value, s)
		}
	}
	var out []string
	for _, x := range scenarios {
		if want[x.name] {
			out = append(out, x.name)
		}
	}
	return out, nil
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
		ScaleInstances: cfg.scaleInstances, ScaleNamespaces: cfg.scaleNamespaces,
		GuardNamespaces: cfg.guardNamespaces, GuardWrites: cfg.guardWrites,
		ExpiryGrants: cfg.expiryGrants, ExpiryNamespaces: cfg.expiryNamespaces, ExpiryWaitSeconds: cfg.expiryWaitSeconds,
		IdleSeconds: cfg.idleSeconds, QPS: cfg.qps, Burst: cfg.burst, FloorWorkers: cfg.floorWorkers, FloorApply: cfg.floorApply, FloorWarmup: cfg.floorWarmup, Repeat: cfg.repeat,
		Scenarios: cfg.scenarios, OriaBinary: cfg.oriaBin, OriaArgs: cfg.oriaArgs, AtSize: cfg.at,
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
	watch, err := newWatchClients(cluster.Config)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cluster.Config)
	if err != nil {
		return err
	}

	var args []string
	if cfg.oriaLimit {
		args = []string{fmt.Sprintf("--kube-api-qps=%g", cfg.qps), fmt.Sprintf("--kube-api-burst=%d", cfg.burst)}
	}
	args = append(append(args, cluster.OriaFlags()...), cfg.oriaArgs...)
	if report.Config.AtSize.GoMemLimitBytes, err = applyMemoryLimit(cfg.at.MemoryLimitBytes); err != nil {
		return err
	}
	logPath := filepath.Join(cfg.outDir, "oria.log")
	logf("starting %s %s (log: %s)", cfg.oriaBin, strings.Join(args, " "), logPath)
	oria, err := startOria(ctx, cfg, cluster.Kubeconfig, logPath, args...)
	if err != nil {
		return err
	}
	// The restart scenario replaces the process (b.oria): the one running
	// at the end is stopped.
	var b *bench
	defer func() {
		logf("stopping oria")
		if b != nil {
			oria = b.oria
		}
		oria.Stop()
	}()

	b = &bench{
		cfg: cfg, admin: admin, restConfig: cluster.Config, watch: watch, dyn: dyn, oria: oria, report: report, logf: logf,
		cluster: cluster, oriaFlags: args,
		mem:    newSampler(ctx, oria.Pid(), 100*time.Millisecond),
		cpPIDs: childPIDs("etcd", "kube-apiserver"),
	}
	if b.apiserver, err = newAPIServer(cluster.Config, cfg.profile, filepath.Join(cfg.outDir, "profiles"), cfg.profileSeconds); err != nil {
		return err
	}
	if !cfg.noFloor {
		limits := []float64{manager.NoClientRateLimit}
		if cfg.qps > 0 {
			limits = append(limits, cfg.qps)
		}
		for _, qps := range limits {
			f, err := newFloor(cluster.Config, qps, cfg.burst, cfg.floorWorkers, cfg.timeout, cfg.floorApply)
			if err != nil {
				return err
			}
			b.floors = append(b.floors, f)
		}
		if cfg.at.ApplyFloor {
			if b.applyFloor, err = newFloor(cluster.Config, manager.NoClientRateLimit, cfg.burst, cfg.at.ApplyFloorWorkers, cfg.timeout, false); err != nil {
				return err
			}
			b.applyFloor.name = fmt.Sprintf("%d workers from the apply, cold", cfg.at.ApplyFloorWorkers)
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
	if b.oria.Exited() {
		return errors.New("oria exited during the run; see " + b.oria.LogPath)
	}
	return nil
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
