// Command localcluster runs oria's local control plane (see
// test/localcluster) for `make run`, `make local-up` and `make local-down`.
//
//	localcluster up    --dir D [--assets A]   start in the background, return when healthy
//	localcluster down  --dir D                stop it and remove its state
//	localcluster serve --dir D [--assets A]   run in the foreground until signalled
//	localcluster run   --dir D [--assets A] [--stop-file F] -- CMD [ARGS]
//	    run CMD with KUBECONFIG pointing at the cluster, and the flags that make
//	    oria serve the cluster's escalation guard (--webhook-host, --webhook-port,
//	    --webhook-cert-dir) appended to ARGS; with $KUBECONFIG already set, CMD
//	    runs against that cluster as given and no local control plane starts.
//	    A cluster started with `up` is reused and left running; otherwise the
//	    cluster is started for CMD and stopped when CMD exits. Ctrl-C, SIGINT
//	    or SIGTERM to this process, or removing F stops both (see stop.go).
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
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	switch args[0] {
	case "up":
		return up(abs, *assets)
	case "down":
		return down(abs)
	case "serve":
		return serve(abs, *assets)
	case "run":
		return runCommand(abs, *assets, *stopFile, fs.Args())
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

func up(dir, assets string) error {
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
	cmd := exec.Command(self, "serve", "--dir", dir, "--assets", assets)
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
			fmt.Printf("local control plane running (pid %d)\n  export KUBECONFIG=%s\n  stop it with: make local-down\n", cmd.Process.Pid, kubeconfig(dir))
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
	return os.RemoveAll(dir)
}

// start starts the cluster with its state in dir; the caller must Stop it.
func start(ctx context.Context, dir, assets string) (*localcluster.Cluster, func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	kcmLog, err := os.Create(kcmLogFile(dir))
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintln(os.Stderr, "starting local control plane (etcd, kube-apiserver, kube-controller-manager) ...")
	c, err := localcluster.Start(ctx, localcluster.Options{Dir: dir, AssetsDir: assets, ControllerManager: true, Log: kcmLog, Webhook: true})
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

func serve(dir, assets string) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	c, stop, err := start(ctx, dir, assets)
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

func runCommand(dir, assets, stopFile string, argv []string) error {
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
		argv = append(argv, strings.Fields(string(b))...)
	default:
		ctx, cancel := stop.context()
		c, s, err := start(ctx, dir, assets)
		cancel()
		if err != nil {
			return err
		}
		stopCluster = func() { s(); _ = os.RemoveAll(dir) }
		fmt.Fprintf(os.Stderr, "local control plane ready; in another terminal: export KUBECONFIG=%s\n", kubeconfig(dir))
		env = append(env, "KUBECONFIG="+kubeconfig(dir))
		argv = append(argv, c.OriaFlags()...)
	}
	err = stop.run(argv, env)
	if stopCluster != nil {
		stopCluster()
	}
	return err
}
