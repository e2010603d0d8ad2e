// Package noolm runs oria on a cluster without OLM v1: etcd and
// kube-apiserver on loopback without the ClusterExtension CRD, oria's
// escalation guard installed as in a real cluster, and the oria binary
// built from ./cmd/oria and run as a separate process. The suite checks
// that oria serves ScopeTemplates, ScopeInstances and the guard, says once
// that OLM v1 is missing, and starts the ClusterExtension controller when
// the CRD is installed later, without a restart (olm.APIWait).
package noolm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/operator-framework/oria/internal/olm"
	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/localcluster"
	"github.com/operator-framework/oria/test/oriaproc"
)

var (
	// cluster is the local control plane (no kube-controller-manager: no
	// test here needs garbage collection or aggregation).
	cluster *localcluster.Cluster
	// k8sClient is a cluster-admin client with oria's scheme.
	k8sClient client.Client
	// oria is the running oria process; oriaStarted is when it was
	// started.
	oria        *oriaproc.Process
	oriaStarted time.Time
)

func TestMain(m *testing.M) {
	testutil.Timeout, testutil.Interval = time.Minute, 100*time.Millisecond
	testutil.RunMain(m, &cluster, localcluster.Options{Webhook: true}, setupOria)
}

// setupOria removes the ClusterExtension CRD the local control plane
// installs (the cluster then has no OLM v1), builds ./cmd/oria and starts
// it (oriaproc.Start waits until /readyz answers 200). Its teardown stops
// oria and prints the end of its log when a test failed.
func setupOria() (func(int), error) {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "oria-noolm-")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (func(int), error) {
		_ = os.RemoveAll(tmp)
		return nil, err
	}
	if k8sClient, err = testutil.AdminClient(cluster); err != nil {
		return fail(err)
	}
	if err := removeClusterExtensionCRD(ctx); err != nil {
		return fail(err)
	}
	bin, err := oriaproc.Build(localcluster.RepoRoot(), tmp)
	if err != nil {
		return fail(err)
	}
	oriaStarted = time.Now()
	args := append([]string{"--default-rbac-mode=Unmanaged"}, cluster.OriaFlags()...)
	if oria, err = oriaproc.Start(ctx, bin, cluster.Kubeconfig, filepath.Join(tmp, "oria.log"), args...); err != nil {
		testutil.Tail(filepath.Join(tmp, "oria.log"), 50)
		return fail(fmt.Errorf("starting oria: %w", err))
	}
	return func(code int) {
		oria.Stop()
		if code != 0 {
			testutil.Tail(oria.LogPath, 200)
		}
		_ = os.RemoveAll(tmp)
	}, nil
}

// clusterExtensionCRD reads the real ClusterExtension CRD from the
// operator-controller module go.mod pins (the file the local control plane
// installs).
func clusterExtensionCRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	path, err := localcluster.ClusterExtensionCRDPath()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(b, crd); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	if crd.Name != olm.ClusterExtensionCRD {
		return nil, fmt.Errorf("%s holds CRD %q, want %q", path, crd.Name, olm.ClusterExtensionCRD)
	}
	return crd, nil
}

// removeClusterExtensionCRD deletes the ClusterExtension CRD and waits
// until it is gone.
func removeClusterExtensionCRD(ctx context.Context) error {
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: olm.ClusterExtensionCRD}}
	if err := k8sClient.Delete(ctx, crd); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the ClusterExtension CRD: %w", err)
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := k8sClient.Get(ctx, client.ObjectKeyFromObject(crd), crd)
		return apierrors.IsNotFound(err), nil
	})
}
