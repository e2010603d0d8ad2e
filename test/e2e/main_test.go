// Package e2e holds oria's end-to-end tests: a real etcd, kube-apiserver and
// kube-controller-manager (garbage collector, namespace, ClusterRole
// aggregation, deployment and replicaset controllers) on loopback, and the
// oria binary built from ./cmd/oria and run as a separate process, exactly
// as a user runs it.
// Access is checked the way a user would, with SubjectAccessReviews against
// the real RBAC authorizer.
package e2e

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/childrun"
	"github.com/operator-framework/oria/test/localcluster"
	"github.com/operator-framework/oria/test/oriaproc"
)

var (
	// cluster is the local control plane, with kube-controller-manager.
	cluster *localcluster.Cluster
	// k8sClient is a cluster-admin client with oria's scheme.
	k8sClient client.Client
	// oria is the running oria process.
	oria *oriaproc.Process
	// oriaBin and oriaLog are the binary and log of oria, to restart it.
	oriaBin, oriaLog string
	// workDir holds them and whatever else the suite builds; the teardown
	// removes it.
	workDir string
	// kcmLog is kube-controller-manager's log (unless ORIA_TEST_VERBOSE
	// sends it to stderr): its end is printed when a test failed, since
	// garbage collection and namespace deletion are its work.
	kcmLog *os.File
)

// oriaArgs are the flags the e2e suite runs oria with. The default mode is
// Unmanaged (oria's own default); tests choose modes per ClusterExtension.
var oriaArgs = []string{"--default-rbac-mode=Unmanaged", "--leader-elect", "--leader-election-namespace=kube-system"}

func TestMain(m *testing.M) {
	// kube-controller-manager and a separate oria process: give every wait
	// more time than in the integration suites.
	testutil.Timeout, testutil.Interval = time.Minute, 100*time.Millisecond
	// The escalation guard is installed as in a real cluster (failurePolicy
	// Fail): every write of an oria object, the tests' and oria's own, goes
	// through it.
	opts := localcluster.Options{ControllerManager: true, Webhook: true}
	flag.Parse() // for testing.Short: with -short there is no control plane, and no log to keep
	besideEachOther()
	if !testing.Short() && os.Getenv("ORIA_TEST_VERBOSE") == "" {
		if f, err := os.CreateTemp("", "oria-e2e-kcm-*.log"); err == nil {
			kcmLog, opts.Log = f, f
		}
	}
	var second *childrun.Run
	if splitRun(testing.Short()) {
		var err error
		if second, err = startSecondProcess(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
			os.Exit(1)
		}
	}
	code := testutil.Run(m, &cluster, opts, setupOria)
	if second != nil {
		fmt.Fprintf(os.Stderr, "=== e2e first process: %s\n", childrun.Result(code))
		c, result := second.Wait(os.Stdout)
		fmt.Fprintln(os.Stderr, result)
		if code == 0 {
			code = c
		}
	}
	os.Exit(code)
}

// setupOria builds ./cmd/oria and runs it against the control plane, and
// sets k8sClient. Its teardown stops oria and, when a test failed, prints
// the end of oria's and kube-controller-manager's logs.
func setupOria() (func(int), error) {
	tmp, err := os.MkdirTemp("", "oria-e2e-")
	if err != nil {
		return nil, err
	}
	workDir, oriaLog = tmp, filepath.Join(tmp, "oria.log")
	oriaBin, err = oriaproc.Build(localcluster.RepoRoot(), tmp)
	if err == nil {
		k8sClient, err = testutil.AdminClient(cluster)
	}
	if err == nil {
		if oria, err = startOria(context.Background()); err != nil {
			testutil.Tail(oriaLog, 50)
			err = fmt.Errorf("starting oria: %w", err)
		}
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		if kcmLog != nil {
			testutil.Tail(kcmLog.Name(), 50)
			_ = os.Remove(kcmLog.Name())
		}
		return nil, err
	}
	return func(code int) {
		oria.Stop()
		if code != 0 {
			testutil.Tail(oria.LogPath, 200)
			if kcmLog != nil {
				testutil.Tail(kcmLog.Name(), 100)
			}
		}
		_ = os.RemoveAll(tmp)
		if kcmLog != nil {
			_ = os.Remove(kcmLog.Name()) // kube-controller-manager stops after this
		}
	}, nil
}

// runsBeside marks t as one that runs beside the other parallel tests of the
// suite: Go runs every serial test first, then these, at most -parallel
// (parallelTests unless given) at a time, so that their waits (oria's
// recheck, a namespace's deletion) overlap. Only for a test that waits long
// and shares nothing with another parallel test: names of its own (the
// samples' fixed names only in TestEachSampleAlone), no restart of oria, no
// assertion on the whole cluster, oria's metrics or its log, and no bound of
// a second or two on oria's latency (a parallel test's load would stretch
// it).
func runsBeside(t *testing.T) {
	t.Helper()
	testutil.NeedCluster(t)
	t.Parallel()
}

// parallelTests is how many runsBeside tests run at once unless -parallel
// says otherwise: all of them (GOMAXPROCS, the default, is 2 here, and the
// longest, TestEachSampleAlone, would then wait for a slot).
const parallelTests = 4

// besideEachOther sets -parallel to parallelTests unless it was given.
func besideEachOther() {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", strconv.Itoa(parallelTests))
	}
}

// startOria starts the oria binary with oriaArgs and the flags that make it
// serve the cluster's escalation guard.
func startOria(ctx context.Context) (*oriaproc.Process, error) {
	return oriaproc.Start(ctx, oriaBin, cluster.Kubeconfig, oriaLog, append(slices.Clone(oriaArgs), cluster.OriaFlags()...)...)
}

func httpGet(url string) (int, string) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		b.WriteString(sc.Text())
		b.WriteByte('\n')
	}
	return resp.StatusCode, b.String()
}

// runBinary runs the built oria binary with args to completion (for flag
// validation tests) and returns its combined output.
func runBinary(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, oria.Cmd.Path, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// readSample decodes every object of a YAML file under config/samples.
func readSample(t *testing.T, name string) []*unstructured.Unstructured {
	t.Helper()
	f, err := os.Open(filepath.Join(localcluster.RepoRoot(), "config", "samples", name))
	require.NoError(t, err)
	defer f.Close()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, "decoding %s", name)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	return objs
}

// applySample applies a config/samples file as `kubectl apply --server-side`
// would, and deletes its objects when the test ends.
func applySample(t *testing.T, name string) []*unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	objs := readSample(t, name)
	for _, u := range objs {
		require.NoError(t, k8sClient.Patch(ctx, u, client.Apply, client.FieldOwner("e2e-kubectl"), client.ForceOwnership), //nolint:staticcheck // unstructured apply
			"applying %s %s from %s", u.GetKind(), u.GetName(), name)
	}
	t.Cleanup(func() { deleteObjects(t, objs) })
	return objs
}

// deleteObjects deletes objs (in reverse order) and waits until they are
// gone; when some are not, the failure names them with what holds them up
// (finalizers, a namespace's finalizers and conditions).
func deleteObjects(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	for i := len(objs) - 1; i >= 0; i-- {
		_ = k8sClient.Delete(ctx, objs[i], client.PropagationPolicy(metav1.DeletePropagationForeground))
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, u := range objs {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(u.GroupVersionKind())
			err := k8sClient.Get(ctx, client.ObjectKeyFromObject(u), got)
			assert.Truef(c, apierrors.IsNotFound(err), "%s %s still there: %s", u.GetKind(), u.GetName(), pending(got, err))
		}
	}, deleteTimeout, 200*time.Millisecond, "objects of a sample were not deleted")
}

// deleteTimeout bounds a sample's clean-up. Namespaces take the longest:
// kube-controller-manager deletes their content first, and retries with
// backoff while the sample's CRD is going away at the same time; once, on
// a loaded machine, that took over two minutes.
const deleteTimeout = 4 * time.Minute

// gcTimeout bounds a wait for kube-controller-manager's garbage collector
// (a dependent deleted, an ownerReference removed). The collector stops its
// workers while it re-syncs its monitors after API discovery changes, and
// the other tests create and delete CRDs all along: once, in CI, a
// dependent outlived its owner by over a minute. What is tested there is
// the ownerReference oria wrote, not the collector's latency.
const gcTimeout = 3 * time.Minute

// pending describes what keeps an object from going away.
func pending(u *unstructured.Unstructured, err error) string {
	if err != nil {
		return err.Error()
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var failing []string
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["status"] == string(metav1.ConditionTrue) {
			failing = append(failing, fmt.Sprintf("%v: %v", m["type"], m["message"]))
		}
	}
	specFinalizers, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "finalizers") // a namespace's
	return fmt.Sprintf("deletionTimestamp %v, finalizers %v, spec.finalizers %v, true conditions %v",
		u.GetDeletionTimestamp(), u.GetFinalizers(), specFinalizers, failing)
}

// can asks the real authorizer whether the access is allowed.
func can(t require.TestingT, a testutil.Access) bool {
	ok, err := testutil.Allowed(context.Background(), k8sClient, a)
	require.NoError(t, err)
	return ok
}

// eventuallyAccess waits until every access check has the wanted answer
// (RBAC changes reach the authorizer through its informers, asynchronously).
func eventuallyAccess(t *testing.T, want bool, checks ...testutil.Access) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, a := range checks {
			assert.Equal(c, want, can(c, a), "%s", a)
		}
	}, testutil.Timeout, testutil.Interval)
}
