package install

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/hack/installer"
	"github.com/operator-framework/oria/internal/cli"
	"github.com/operator-framework/oria/test/localcluster"
)

// TestLocalSmoke is docs/operations.md's local smoke test, in Go: on the
// local control plane as `make local-up GUARD=false` starts it (no guard of
// its own), the install of a release applies as it is, as `kubectl apply
// --server-side -f dist/install.yaml` sends it (no --force-conflicts), and
// `kubectl oria check` of the same release shows what the guide says: the
// CRDs, the webhook configuration's rules and the versions are ok; the
// control plane has no node (no kubelet), so no pod runs: that fails once,
// on the nodes line, and the caBundle (oria fills it), the dry run (the
// guard's Service has no endpoint), the replicas and the Lease, which
// follow from it, are skipped, each saying so.
func TestLocalSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane of its own")
	}
	const version = "v0.1.0"
	b, err := installer.RenderVersion(localcluster.RepoRoot(), installer.DefaultDir, "example.com/oria:"+version, version)
	require.NoError(t, err)
	objs, err := decodeAll(b)
	require.NoError(t, err)

	ctx := context.Background()
	local, err := localcluster.Start(ctx, localcluster.Options{Dir: t.TempDir(), ControllerManager: true, Webhook: false})
	require.NoError(t, err)
	t.Cleanup(func() { _ = local.Stop() })
	scheme, err := cli.Scheme()
	require.NoError(t, err)
	c, err := client.New(local.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)

	for _, u := range objs {
		// kubectl apply --server-side: field manager kubectl, conflicts
		// refused.
		err := c.Patch(ctx, u.DeepCopy(), client.Apply, client.FieldOwner("kubectl")) //nolint:staticcheck // unstructured apply
		require.NoError(t, err, "applying %s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
	}

	f, err := cli.ReadCheck(ctx, c, cli.DefaultNamespace, version)
	require.NoError(t, err)
	got := map[string][]string{}
	var lines []string
	for _, v := range cli.Verdicts(f) {
		got[v.Check] = append(got[v.Check], v.Result)
		lines = append(lines, v.Result+" "+v.Check+": "+v.Message)
	}
	t.Logf("check:\n%s", strings.Join(lines, "\n"))
	assert.Equal(t, map[string][]string{
		"OLM v1":      {cli.CheckOK},
		"oria":        slices.Repeat([]string{cli.CheckOK}, len(cli.OriaCRDs)), // each CRD
		"nodes":       {cli.CheckFailed},                                       // no node: no pod runs
		"webhook":     {cli.CheckSkipped},                                      // its caBundle is empty: oria fills it
		"certificate": {cli.CheckSkipped},                                      // behind a Service
		"dry run":     {cli.CheckSkipped},                                      // no endpoint: no pod runs
		"replicas":    {cli.CheckSkipped},                                      // 0 of 2 ready
		"leader":      {cli.CheckSkipped},                                      // no Lease
		"versions":    {cli.CheckOK},
	}, got)
	assert.Empty(t, cli.OutsideURL(f), "an install in the cluster")
	for _, v := range cli.Verdicts(f) {
		if v.Result == cli.CheckSkipped && v.Check != "certificate" {
			assert.Contains(t, v.Message, "needs a node (no node is Ready, see the nodes line): ")
		}
		switch v.Check {
		case "nodes":
			assert.Contains(t, v.Message, "the cluster has no node: no pod can run")
		case "webhook":
			assert.Contains(t, v.Message, "its caBundle is empty")
		case "dry run":
			assert.Contains(t, v.Message, "could not call the guard")
		case "replicas":
			assert.Contains(t, v.Message, "0 of 2 replicas of Deployment oria-system/oria are ready")
		case "versions":
			assert.Equal(t, "plugin and server are both "+version, v.Message)
		}
	}
}
