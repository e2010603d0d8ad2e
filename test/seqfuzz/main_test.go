package seqfuzz

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/localcluster"
	"github.com/operator-framework/oria/test/oriaproc"
)

var (
	// cluster is the local control plane (with kube-controller-manager: the
	// namespace controller and the garbage collector are part of the world
	// the attacker plays in).
	cluster *localcluster.Cluster
	// env is what every sequence shares: clients, oria, the extension.
	env *Env
)

func TestMain(m *testing.M) {
	opts := localcluster.Options{ControllerManager: true, Webhook: true}
	flag.Parse()
	testutil.RunMain(m, &cluster, opts, setup)
}

// setup builds oria, prepares the cluster-wide fixtures and starts oria.
func setup() (func(int), error) {
	dir, err := os.MkdirTemp("", "oria-seqfuzz-")
	if err != nil {
		return nil, err
	}
	bin, err := oriaproc.Build(localcluster.RepoRoot(), dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env, err = NewEnv(ctx, cluster, bin, dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("seqfuzz environment: %w", err)
	}
	return func(code int) {
		env.Oria.Stop()
		if code != 0 {
			for _, log := range env.Oria.LogPaths() {
				testutil.Tail(log, 60)
			}
		}
		_ = os.RemoveAll(dir)
	}, nil
}
