// Package olm runs oria against the real OLM v1: operator-controller and
// catalogd, built from the Go module proxy by hack/olm.sh, run as processes
// next to the local control plane (etcd, kube-apiserver,
// kube-controller-manager) and the oria binary. The whole suite runs once
// per release (v1.2.0 and v1.5.1; releases_test.go), each time on a fresh
// control plane. Bundle and catalog images are built in Go and served by an
// in-process OCI registry on loopback (HTTPS, with a CA of the suite's own
// that catalogd and operator-controller are given with --pull-cas-dir).
// Nothing here creates an extension's CRDs or ClusterRoles by hand:
// operator-controller installs, upgrades and uninstalls them, and the tests
// check oria's answer with SubjectAccessReviews.
//
// No kubelet runs: the bundle's Deployment has no replicas, and a Helm
// install reports Installed=True without pods.
package olm

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/localcluster"
	"github.com/operator-framework/oria/test/oriaproc"
)

// systemNamespace is OLM's own namespace (Helm release storage, leases).
const systemNamespace = "olmv1-system"

var (
	cluster   *localcluster.Cluster
	k8sClient client.Client
	// workDir holds certificates, caches and logs; the teardown removes it.
	workDir string
	pki     *certs
	// registryHost is the in-process registry, 127.0.0.1:<port>.
	registryHost string

	oria               *oriaproc.Process
	catalogd           *process
	operatorController *process
	// ocMetricsURL is operator-controller's metrics endpoint (HTTPS, bearer
	// token of a ServiceAccount allowed to get /metrics: metricsToken).
	ocMetricsURL, metricsToken string
	kcmLog                     *os.File
)

func TestMain(m *testing.M) {
	enterPodIfShim() // the test binary run as a pod's shim (pod_test.go) execs an OLM binary
	// operator-controller, catalogd and oria are separate processes, and an
	// install goes through the registry and the catalog: waits get time.
	testutil.Timeout, testutil.Interval = 2*time.Minute, 200*time.Millisecond
	flag.Parse() // for testing.Short: with -short nothing is built or started
	if testing.Short() {
		testutil.RunMain(m, &cluster, localcluster.Options{})
	}
	releases, err := olmReleases()
	if err != nil {
		fmt.Fprintf(os.Stderr, "OLM v1 binaries: %v\n", err)
		os.Exit(1)
	}
	if concurrently(releases) {
		os.Exit(runConcurrently(m, releases))
	}
	// The whole suite once per release (testing.M.Run may run more than
	// once: go.dev/issue/23129); the exit code is the first failure's.
	code := 0
	var results []string
	for _, r := range releases {
		fmt.Fprintf(os.Stderr, "=== olm suite: operator-controller and catalogd %s (%s)\n", r.version, r.dir)
		start := time.Now()
		c := runRelease(m, r)
		result := "ok"
		if c != 0 {
			result = "FAIL"
			if code == 0 {
				code = c
			}
		}
		results = append(results, fmt.Sprintf("=== olm suite: %s %s in %s", result, r.version, time.Since(start).Round(time.Second)))
		fmt.Fprintln(os.Stderr, results[len(results)-1])
	}
	if len(results) > 1 {
		fmt.Fprintln(os.Stderr, strings.Join(results, "\n"))
	}
	os.Exit(code)
}

// runRelease runs the suite against r: a control plane of its own with r's
// CRDs, r's catalogd and operator-controller, oria.
func runRelease(m *testing.M, r olmRelease) int {
	underTest = r
	// The release's own CRDs: its ClusterExtension CRD instead of the
	// v1.11.0 one localcluster installs by default (given both, envtest
	// installed either, varying from run to run: v1.5.1's watchNamespace
	// tests then found spec.config pruned), and catalogd's ClusterCatalog.
	crds := filepath.Join(r.dir, "crds")
	opts := localcluster.Options{
		ControllerManager:   true,
		Webhook:             true,
		ClusterExtensionCRD: filepath.Join(crds, "olm.operatorframework.io_clusterextensions.yaml"),
		ExtraCRDPaths:       []string{filepath.Join(crds, "olm.operatorframework.io_clustercatalogs.yaml")},
	}
	kcmLog = nil
	if os.Getenv("ORIA_TEST_VERBOSE") == "" {
		if f, err := os.CreateTemp("", "oria-olm-kcm-*.log"); err == nil {
			kcmLog, opts.Log = f, f
		}
	}
	return testutil.Run(m, &cluster, opts, setup)
}

// setup starts the registry, catalogd, operator-controller and oria.
func setup() (func(int), error) {
	var err error
	if workDir, err = os.MkdirTemp("", "oria-olm-"+underTest.version+"-"); err != nil {
		return nil, err
	}
	var stops []func()
	teardown := func(code int) {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		if code != 0 {
			for _, p := range []*process{operatorController, catalogd} {
				if p != nil {
					testutil.Tail(p.logPath, 100)
				}
			}
			if oria != nil {
				testutil.Tail(oria.LogPath, 100)
			}
			if kcmLog != nil {
				testutil.Tail(kcmLog.Name(), 50)
			}
		}
		if code != 0 || os.Getenv("ORIA_OLM_KEEP") != "" {
			// The whole logs, for what the tails above do not explain.
			fmt.Fprintf(os.Stderr, "olm suite %s: logs kept in %s (kube-controller-manager: %v)\n", underTest.version, workDir, kcmLog != nil)
			if kcmLog != nil {
				_ = os.Rename(kcmLog.Name(), filepath.Join(workDir, "kube-controller-manager.log"))
			}
			return
		}
		_ = os.RemoveAll(workDir)
		if kcmLog != nil {
			_ = os.Remove(kcmLog.Name())
		}
	}
	fail := func(err error) (func(int), error) {
		teardown(1)
		return nil, err
	}
	ctx := context.Background()

	if pki, err = newCerts(workDir); err != nil {
		return fail(err)
	}
	reg := httptest.NewUnstartedServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	reg.TLS = pki.serverTLS()
	reg.StartTLS()
	stops = append(stops, reg.Close)
	registryHost = strings.TrimPrefix(reg.URL, "https://")

	if k8sClient, err = testutil.AdminClient(cluster); err != nil {
		return fail(err)
	}
	if err := prepareCluster(ctx); err != nil {
		return fail(fmt.Errorf("preparing the cluster for OLM: %w", err))
	}

	ports, err := localcluster.FreePorts(7)
	if err != nil {
		return fail(err)
	}
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	catalogd, err = start(ctx, "catalogd", catalogdAccount, "http://"+addr(1)+"/readyz",
		"--metrics-bind-address="+addr(0),
		"--health-probe-bind-address="+addr(1),
		"--catalogs-server-addr="+addr(2),
		"--external-address="+addr(2),
		"--webhook-server-port="+strconv.Itoa(ports[3]),
		"--tls-cert="+pki.certFile, "--tls-key="+pki.keyFile,
		"--pull-cas-dir="+pki.caDir,
		"--cache-dir="+filepath.Join(workDir, "catalogd-cache"),
		"--system-namespace="+systemNamespace,
	)
	if err != nil {
		return fail(err)
	}
	stops = append(stops, catalogd.stop)
	ocMetricsURL = "https://" + addr(4) + "/metrics"
	ocArgs := []string{
		"--metrics-bind-address=" + addr(4),
		"--health-probe-bind-address=" + addr(5),
		"--tls-cert=" + pki.certFile, "--tls-key=" + pki.keyFile,
		"--catalogd-cas-dir=" + pki.caDir,
		"--pull-cas-dir=" + pki.caDir,
		"--cache-path=" + filepath.Join(workDir, "operator-controller-cache"),
		"--system-namespace=" + systemNamespace,
	}
	if underTest.featureGates != "" {
		ocArgs = append(ocArgs, "--feature-gates="+underTest.featureGates)
	}
	operatorController, err = start(ctx, "operator-controller", operatorControllerAccount, "http://"+addr(5)+"/readyz", ocArgs...)
	if err != nil {
		return fail(err)
	}
	stops = append(stops, operatorController.stop)

	oriaBin, err := oriaproc.Build(localcluster.RepoRoot(), workDir)
	if err != nil {
		return fail(err)
	}
	args := append([]string{"--default-rbac-mode=Unmanaged", "--leader-elect", "--leader-election-namespace=kube-system"}, cluster.OriaFlags()...)
	if oria, err = oriaproc.Start(ctx, oriaBin, cluster.Kubeconfig, filepath.Join(workDir, "oria.log"), args...); err != nil {
		return fail(fmt.Errorf("starting oria: %w", err))
	}
	stops = append(stops, oria.Stop)
	return teardown, nil
}

// installerRole is what the installer ServiceAccount of every test's
// ClusterExtension may do: v1.2.0 and v1.5.1 install with that
// ServiceAccount's token (v1.11.0 ignores spec.serviceAccount and installs as
// itself). It covers
// what the test bundle holds — CRDs, ClusterRoles and their bindings (the
// CSV's clusterPermissions, which the installer must hold or escalate),
// ServiceAccounts, Deployments — and setting blockOwnerDeletion on them.
const installerRole = "oria-olm-e2e-installer"

// metricsReader may read operator-controller's metrics.
const metricsReader = "oria-olm-e2e-metrics-reader"

// The ServiceAccounts of catalogd's and operator-controller's pods.
const (
	catalogdAccount           = "catalogd-controller-manager"
	operatorControllerAccount = "operator-controller-controller-manager"
)

// prepareCluster creates OLM's namespace, the installer ClusterRole, the
// accounts of OLM's pods, and the metrics reader with its token.
func prepareCluster(ctx context.Context) error {
	all := []string{"*"}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: systemNamespace}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: installerRole}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: all},
			{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles", "clusterrolebindings", "roles", "rolebindings"}, Verbs: all},
			{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: all},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: all},
			{APIGroups: []string{"olm.operatorframework.io"}, Resources: []string{"clusterextensions/finalizers"}, Verbs: []string{"update"}},
		}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: metricsReader, Namespace: systemNamespace}},
		// The accounts of OLM's pods (pod_test.go), as upstream names them.
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: catalogdAccount, Namespace: systemNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: operatorControllerAccount, Namespace: systemNamespace}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: metricsReader}, Rules: []rbacv1.PolicyRule{
			{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}},
		}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: metricsReader},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReader},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: metricsReader, Namespace: systemNamespace}},
		},
	}
	for _, o := range objs {
		if err := k8sClient.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	var err error
	metricsToken, err = serviceAccountToken(ctx, metricsReader)
	return err
}

// process is a running OLM binary.
type process struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
}

// olmCommand returns the command that runs the release's binary name (its
// pod's ServiceAccount account) with args: as a process, or, for a release
// that must run in a pod, as in one (podCommand).
func olmCommand(ctx context.Context, name, account string, args ...string) (*exec.Cmd, error) {
	bin := filepath.Join(underTest.dir, name)
	if underTest.inPod {
		return podCommand(ctx, filepath.Join(workDir, name+"-run"), account, bin, args...)
	}
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	return cmd, nil
}

// start runs the release's binary name (its pod's ServiceAccount account)
// with args and KUBECONFIG set (admin: the deployment's own ClusterRoles are
// not what is under test) and waits until readyURL answers 200.
func start(ctx context.Context, name, account, readyURL string, args ...string) (*process, error) {
	cmd, err := olmCommand(ctx, name, account, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &process{logPath: filepath.Join(workDir, name+".log"), done: make(chan struct{}), cmd: cmd}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		return nil, err
	}
	if p.cmd.Env == nil {
		p.cmd.Env = os.Environ()
	}
	p.cmd.Env = append(p.cmd.Env, "KUBECONFIG="+cluster.Kubeconfig)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { _ = p.cmd.Wait(); logFile.Close(); close(p.done) }()
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-p.done:
			testutil.Tail(p.logPath, 50)
			return nil, fmt.Errorf("%s exited during start-up (%v)", name, p.cmd.ProcessState)
		case <-time.After(200 * time.Millisecond):
		}
		if resp, err := hc.Get(readyURL); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			p.stop()
			testutil.Tail(p.logPath, 50)
			return nil, errors.New(name + " not ready within 2m")
		}
	}
}

func (p *process) stop() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
