package testutil

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/operator-framework/oria/test/localcluster"
)

// Timeout and Interval are how long the Eventually helpers of this package
// wait, and how often they look. A suite whose control plane does more (the
// end-to-end suite) sets a longer Timeout in its TestMain, before RunMain.
var (
	Timeout  = 30 * time.Second
	Interval = 50 * time.Millisecond
)

// Setup prepares a package's suite once the control plane is up (for
// example by starting a manager its tests share). The teardown it returns
// (nil for none) runs after the tests, with their exit code, before the
// control plane stops.
type Setup func() (teardown func(code int), err error)

// running is the control plane RunMain started for this test binary; nil
// with -short, or in a package whose TestMain does not call RunMain.
var running *localcluster.Cluster

// RunMain starts a local control plane with opts (kube-controller-manager's
// output goes to stderr with ORIA_TEST_VERBOSE set, unless opts.Log says
// otherwise), stores it in *cluster, runs each setup, runs the package's
// tests, and stops everything again. Use it from TestMain:
//
//	var cluster *localcluster.Cluster
//	func TestMain(m *testing.M) { testutil.RunMain(m, &cluster, localcluster.Options{}) }
//
// With -short no control plane is started and *cluster stays nil: the tests
// run, and every test that needs the control plane skips itself with
// NeedCluster, its first statement.
func RunMain(m *testing.M, cluster **localcluster.Cluster, opts localcluster.Options, setup ...Setup) {
	os.Exit(runMain(m, cluster, opts, setup))
}

// Run is RunMain without the exit: it returns the tests' exit code, so that
// a TestMain can run its package's tests more than once, each time on a
// fresh control plane (test/olm runs them once per OLM v1 release).
func Run(m *testing.M, cluster **localcluster.Cluster, opts localcluster.Options, setup ...Setup) int {
	return runMain(m, cluster, opts, setup)
}

func runMain(m *testing.M, cluster **localcluster.Cluster, opts localcluster.Options, setup []Setup) (code int) {
	if !flag.Parsed() {
		flag.Parse() // TestMain runs before the testing package parses flags
	}
	if testing.Short() {
		return m.Run()
	}
	if opts.Log == nil {
		opts.Log = logWriter()
	}
	c, err := localcluster.Start(context.Background(), opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting local control plane: %v\n", err)
		return 1
	}
	*cluster, running = c, c
	defer func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping local control plane: %v\n", err)
		}
	}()
	for _, s := range setup {
		teardown, err := s()
		if err != nil {
			fmt.Fprintf(os.Stderr, "setting up the test suite: %v\n", err)
			return 1
		}
		if teardown != nil {
			defer func() { teardown(code) }()
		}
	}
	return m.Run()
}

// logWriter is where kube-controller-manager's output goes: stderr with
// ORIA_TEST_VERBOSE set, nowhere otherwise.
func logWriter() io.Writer {
	if os.Getenv("ORIA_TEST_VERBOSE") != "" {
		return os.Stderr
	}
	return nil
}

// NeedCluster skips t unless RunMain started a control plane (it does not
// with -short). Every test that talks to the API server calls it first, so
// that `go test -short ./...` runs the unit tests and skips the rest cleanly.
func NeedCluster(t testing.TB) {
	t.Helper()
	if running == nil {
		t.Skip("needs the local control plane (not started with -short)")
	}
}
