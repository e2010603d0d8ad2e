// Command localcluster runs oria's local control plane (see
// test/localcluster) for `make run`, `make local-up` and `make local-down`.
//
//	localcluster up    --dir D [--assets A] [--guard=false] [--link F]...
//	    start in the background, return when healthy; --guard=false starts
//	    it without oria's escalation guard (no webhook configuration, no
//	    status policy), so that a release's install.yaml applies as it is
//	localcluster down  --dir D                stop it and remove its state
//	localcluster serve --dir D [--assets A] [--guard=false]
//	    run in the foreground until signalled
//	localcluster run   --dir D [--assets A] [--stop-file F] [--link F]... -- CMD [ARGS]
//	    run CMD with KUBECONFIG pointing at the cluster, and the flags that make
//	    oria serve the cluster's escalation guard (--webhook-host, --webhook-port,
//	    --webhook-cert-dir) and elect a leader (--leader-elect: its Lease in
//	    kube-system, where `kubectl oria check` finds it) appended to ARGS; with
//	    $KUBECONFIG already set, CMD runs against that cluster as given and no
//	    local control plane starts. A cluster started with `up` is reused and
//	    left running; otherwise the cluster is started for CMD and stopped, its
//	    state removed (it says so), when CMD exits. Ctrl-C, SIGINT or SIGTERM
//	    to this process, or removing F stops both (see stop.go).
//
// --link F links the file F into D/bin (make run and make local-up link the
// kubectl of the control plane's release and the plugin), and the exports
// printed at start put D/bin first on PATH.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/operator-framework/oria/test/localcluster"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "localcluster: %v\n", err)
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.ExitCode())
		}
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: localcluster up|down|serve|run --dir DIR [--assets DIR] [-- CMD ARGS]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	dir := fs.String("dir", ".local", "state directory (kubeconfig, certificates, etcd data, logs)")
	assets := fs.String("assets", "", "directory with etcd, kube-apiserver and kube-controller-manager")
	stopFile := fs.String("stop-file", "", "run: a file created at once; removing it stops CMD and the cluster, as SIGINT does (make run: make removes it when it gets SIGINT)")
	guard := fs.Bool("guard", true, "up, serve: install oria's escalation guard (its webhook configuration, calling oria at a local URL, and its status policy); false leaves both to an install.yaml")
	var link links
	fs.Var(&link, "link", "up, run: a file to link into DIR/bin (repeatable)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	switch args[0] {
	case "up":
		if err := up(abs, *assets, *guard); err != nil {
			return err
		}
		if err := linkTools(abs, link); err != nil {
			return err
		}
		printExports(os.Stdout, abs)
		fmt.Println("stop it with: make local-down (which removes " + abs + ")")
		return nil
	case "down":
		return down(abs)
	case "serve":
		return serve(abs, *assets, *guard)
	case "run":
		return runCommand(abs, *assets, *stopFile, link, fs.Args())
	default:
		return fmt.Errorf("unknown command %q", args[0])
	}
}

func pidFile(dir string) string    { return filepath.Join(dir, "localcluster.pid") }
func readyFile(dir string) string  { return filepath.Join(dir, "ready") }
func kubeconfig(dir string) string { return filepath.Join(dir, "kubeconfig") }
func logFile(dir string) string    { return filepath.Join(dir, "localcluster.log") }
func kcmLogFile(dir string) string { return filepath.Join(dir, "kube-controller-manager.log") }

// oriaFlagsFile holds, one a line, the flags oria needs to serve the
// escalation guard of the cluster running in dir.
func oriaFlagsFile(dir string) string { return filepath.Join(dir, "oria-flags") }

// running returns the pid of a live `serve` process for dir, or 0.
func running(dir string) int {
	b, err := os.ReadFile(pidFile(dir))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	if syscall.Kill(pid, 0) != nil {
		return 0
	}
	if _, err := os.Stat(readyFile(dir)); err != nil {
		return 0
	}
	return pid
}

func up(dir, assets string, guard bool) error {
	if pid := running(dir); pid != 0 {
		fmt.Printf("local control plane already running (pid %d); kubeconfig: %s\n", pid, kubeconfig(dir))
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	_ = os.Remove(readyFile(dir))
	self, err := os.Executable()
	if err != nil {
		return err
	}
	log, err := os.Create(logFile(dir))
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(self, "serve", "--dir", dir, "--assets", assets, "--guard="+strconv.FormatBool(guard))
	cmd.Stdout, cmd.Stderr = log, log
	// A session of its own: the cluster outlives this command and the
	// terminal's Ctrl-C.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(5 * time.Minute)
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("local control plane failed to start (%v); see %s", err, logFile(dir))
		case <-deadline:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			return fmt.Errorf("local control plane not ready after 5m; see %s", logFile(dir))
		case <-time.After(200 * time.Millisecond):
		}
		if _, err := os.Stat(readyFile(dir)); err == nil {
			what := "with oria's escalation guard: run oria with make run"
			if !guard {
				what = "without oria's escalation guard: ready for a release's install.yaml (docs/operations.md, a local smoke test)"
			}
			fmt.Printf("local control plane running (pid %d), %s\n", cmd.Process.Pid, what)
			return nil
		}
	}
}

func down(dir string) error {
	if pid := running(dir); pid != 0 {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		for i := 0; i < 300 && syscall.Kill(pid, 0) == nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
		if syscall.Kill(pid, 0) == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		fmt.Println("local control plane stopped")
	}
	if _, err := os.Stat(dir); err == nil {
		fmt.Printf("removing its state: %s (%s)\n", dir, stateContents)
	}
	return os.RemoveAll(dir)
}

// start starts the cluster with its state in dir; the caller must Stop it.
func start(ctx context.Context, dir, assets string, guard bool) (*localcluster.Cluster, func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	kcmLog, err := os.Create(kcmLogFile(dir))
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintln(os.Stderr, "starting local control plane (etcd, kube-apiserver, kube-controller-manager) ...")
	c, err := localcluster.Start(ctx, localcluster.Options{Dir: dir, AssetsDir: assets, ControllerManager: true, Log: kcmLog, Webhook: guard})
	if err != nil {
		kcmLog.Close()
		return nil, nil, err
	}
	stop := func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping local control plane: %v\n", err)
		}
		kcmLog.Close()
	}
	return c, stop, nil
}

func serve(dir, assets string, guard bool) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	c, stop, err := start(ctx, dir, assets, guard)
	if err != nil {
		return err
	}
	if err := os.WriteFile(oriaFlagsFile(dir), []byte(strings.Join(c.OriaFlags(), "\n")+"\n"), 0o644); err != nil {
		stop()
		return err
	}
	if err := os.WriteFile(pidFile(dir), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		stop()
		return err
	}
	if err := os.WriteFile(readyFile(dir), nil, 0o644); err != nil {
		stop()
		return err
	}
	fmt.Fprintf(os.Stderr, "local control plane ready; KUBECONFIG=%s\n", kubeconfig(dir))
	<-ctx.Done()
	stop()
	return nil
}

// isLocal reports whether path is the kubeconfig of the local control plane
// running in dir (what `make local-up` tells users to export).
func isLocal(dir, path string) bool {
	if running(dir) == 0 {
		return false
	}
	a, err1 := os.Stat(path)
	b, err2 := os.Stat(kubeconfig(dir))
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// leaderFlags make oria on the local control plane elect a leader, as an
// install's replicas do: its Lease (in kube-system, oria's namespace outside
// a pod) is what `kubectl oria check` reads to tell that it reconciles.
var leaderFlags = []string{"--leader-elect"}

// withLeaderFlags puts leaderFlags right after the command, so that the
// command's own arguments (make run's ARGS) can say otherwise.
func withLeaderFlags(argv []string) []string {
	return append(append([]string{argv[0]}, leaderFlags...), argv[1:]...)
}

func runCommand(dir, assets, stopFile string, link []string, argv []string) error {
	if len(argv) == 0 {
		return errors.New("run needs a command after --")
	}
	stop, err := newStopper(stopFile)
	if err != nil {
		return err
	}
	defer stop.close()
	env := os.Environ()
	var stopCluster func()
	switch {
	case os.Getenv("KUBECONFIG") != "" && !isLocal(dir, os.Getenv("KUBECONFIG")):
		fmt.Fprintf(os.Stderr, "using the cluster of KUBECONFIG=%s\n", os.Getenv("KUBECONFIG"))
	case running(dir) != 0:
		fmt.Fprintf(os.Stderr, "using the local control plane started by `make local-up` (%s)\n", kubeconfig(dir))
		env = append(env, "KUBECONFIG="+kubeconfig(dir))
		b, err := os.ReadFile(oriaFlagsFile(dir))
		if err != nil {
			return fmt.Errorf("reading the escalation guard's flags (restart with make local-down local-up): %w", err)
		}
		argv = append(withLeaderFlags(argv), strings.Fields(string(b))...)
		if err := linkTools(dir, link); err != nil {
			return err
		}
		printExports(os.Stderr, dir)
	default:
		ctx, cancel := stop.context()
		c, s, err := start(ctx, dir, assets, true)
		cancel()
		if err != nil {
			return err
		}
		stopCluster = func() {
			s()
			fmt.Fprintf(os.Stderr, "local control plane stopped; removing its state: %s (%s). To keep a cluster between runs, start it with make local-up (make local-down removes it)\n",
				dir, stateContents)
			_ = os.RemoveAll(dir)
		}
		if err := linkTools(dir, link); err != nil {
			stopCluster()
			return err
		}
		fmt.Fprint(os.Stderr, "local control plane ready; ")
		printExports(os.Stderr, dir)
		env = append(env, "KUBECONFIG="+kubeconfig(dir))
		argv = append(withLeaderFlags(argv), c.OriaFlags()...)
	}
	err = stop.run(argv, env)
	if stopCluster != nil {
		stopCluster()
	}
	return err
}
