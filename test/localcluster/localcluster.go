// Package localcluster runs a real, local Kubernetes control plane: etcd and
// kube-apiserver (RBAC authorization on), optionally kube-controller-manager
// (garbage collector, namespace and ClusterRole aggregation controllers), all
// on loopback. It installs oria's CRDs and the real ClusterExtension CRD from
// the operator-controller module.
//
// It is the fixture of every Go test suite that needs an API server
// (integration tests start it without the controller manager, end-to-end
// tests with it) and the engine behind `make run` / `make local-up`
// (hack/localcluster).
package localcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// OperatorControllerModule is the Go module that ships the ClusterExtension
// types and CRD.
const OperatorControllerModule = "github.com/operator-framework/operator-controller"

// clusterExtensionCRD is the CRD file's path inside the operator-controller
// module.
const clusterExtensionCRD = "helm/olmv1/base/operator-controller/crd/standard/olm.operatorframework.io_clusterextensions.yaml"

// ControllerManagerControllers are the kube-controller-manager controllers
// the local control plane runs: enough for garbage collection of owned
// objects, namespace deletion and ClusterRole aggregation, which is what oria
// relies on, and the deployment and replicaset controllers, which turn the
// restarts of a ScopeInstance's publication into ReplicaSets (no pod runs:
// there is no scheduler or kubelet).
var ControllerManagerControllers = []string{
	"garbage-collector-controller",
	"namespace-controller",
	"clusterrole-aggregation-controller",
	"serviceaccount-controller",
	"deployment-controller",
	"replicaset-controller",
}

// Options configure Start.
type Options struct {
	// Dir holds certificates, etcd data, logs and the admin kubeconfig. When
	// empty a temporary directory is used and removed by Stop.
	Dir string
	// AssetsDir holds the etcd, kube-apiserver and kube-controller-manager
	// binaries. When empty, $KUBEBUILDER_ASSETS is used, and when that is
	// empty too, hack/controlplane.sh builds (or finds in its cache) them.
	AssetsDir string
	// ControllerManager also starts kube-controller-manager.
	ControllerManager bool
	// ClusterExtensionCRD is the ClusterExtension CRD file to install
	// instead of the one of the operator-controller module go.mod pins
	// (another release's). Never pass one in ExtraCRDPaths: envtest would
	// install both definitions of the name, in an order that varies.
	ClusterExtensionCRD string
	// ExtraCRDPaths are installed in addition to oria's CRDs and the
	// ClusterExtension CRD.
	ExtraCRDPaths []string
	// Log receives the output of kube-controller-manager; nil discards it.
	Log io.Writer
	// Webhook installs oria's escalation guard (the ValidatingWebhookConfiguration
	// of config/webhook/manifests.yaml, failurePolicy Fail) pointing at
	// https://127.0.0.1:<free port>, with a CA and serving certificate
	// generated for it, and the guard's ValidatingAdmissionPolicy
	// (config/webhook/status-policy.yaml: only oria writes status). oria
	// must then run with OriaFlags(); until it serves, every write of an
	// oria object is refused.
	Webhook bool
}

// Cluster is a running local control plane.
type Cluster struct {
	// Config is a cluster-admin rest.Config (system:masters).
	Config *rest.Config
	// Kubeconfig is the path of an admin kubeconfig file for Config.
	Kubeconfig string
	// Dir is the state directory.
	Dir string

	// Webhook is set when the escalation guard is installed.
	Webhook *Webhook

	env     *envtest.Environment
	kcm     *exec.Cmd
	kcmDone chan struct{}
	tempDir bool
}

// RepoRoot returns the root of the oria source tree this package was compiled
// from. Tests and hack tools run from within the tree, so the source is there.
func RepoRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "."
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// ClusterExtensionCRDPath locates the real ClusterExtension CRD in the
// operator-controller module that go.mod pins.
func ClusterExtensionCRDPath() (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", OperatorControllerModule)
	cmd.Dir = RepoRoot()
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating module %s: %w", OperatorControllerModule, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		// Not downloaded yet (a fresh module cache); fetch it.
		dl := exec.Command("go", "mod", "download", OperatorControllerModule)
		dl.Dir = RepoRoot()
		dl.Stderr = os.Stderr
		if err := dl.Run(); err != nil {
			return "", fmt.Errorf("downloading module %s: %w", OperatorControllerModule, err)
		}
		return ClusterExtensionCRDPath()
	}
	p := filepath.Join(dir, clusterExtensionCRD)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("ClusterExtension CRD: %w", err)
	}
	return p, nil
}

// Assets returns the directory holding the control-plane binaries, building
// them with hack/controlplane.sh when needed.
func Assets(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d, nil
	}
	cmd := exec.Command("bash", filepath.Join(RepoRoot(), "hack", "controlplane.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building control-plane binaries: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Start starts a control plane and waits until it is healthy: the API server
// serves, the CRDs are established and, with a controller manager, the
// built-in admin ClusterRole has aggregated rules.
func Start(ctx context.Context, opts Options) (_ *Cluster, retErr error) {
	assets, err := Assets(opts.AssetsDir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: opts.Dir}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "oria-localcluster-"); err != nil {
			return nil, err
		}
		c.tempDir = true
	}
	defer func() {
		if retErr != nil {
			_ = c.Stop()
		}
	}()
	for _, sub := range []string{"certs", "etcd", "kcm", "webhook"} {
		// State from an earlier run that did not stop cleanly would mix
		// certificates and data of two clusters: start fresh.
		_ = os.RemoveAll(filepath.Join(c.Dir, sub))
		if err := os.MkdirAll(filepath.Join(c.Dir, sub), 0o700); err != nil {
			return nil, err
		}
	}

	ceCRD := opts.ClusterExtensionCRD
	if ceCRD == "" {
		if ceCRD, err = ClusterExtensionCRDPath(); err != nil {
			return nil, err
		}
	}
	c.env = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDInstallOptions: envtest.CRDInstallOptions{
			Paths:              append([]string{filepath.Join(RepoRoot(), "config", "crd", "bases"), ceCRD}, opts.ExtraCRDPaths...),
			ErrorIfPathMissing: true,
		},
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	if opts.Webhook {
		hooks, err := webhookConfigurations()
		if err != nil {
			return nil, err
		}
		c.env.WebhookInstallOptions = envtest.WebhookInstallOptions{ValidatingWebhooks: hooks, LocalServingHost: "127.0.0.1"}
	}
	api := c.env.ControlPlane.GetAPIServer()
	api.CertDir = filepath.Join(c.Dir, "certs")
	c.env.ControlPlane.Etcd = &envtest.Etcd{DataDir: filepath.Join(c.Dir, "etcd")}
	// Local clusters are a single trusted user's: lift the per-client
	// request limits so that scale tests measure oria, not the server's
	// defaults for shared clusters.
	api.Configure().Set("max-requests-inflight", "3000")
	api.Configure().Set("max-mutating-requests-inflight", "1000")

	cfg, err := c.env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting etcd and kube-apiserver: %w", err)
	}
	cfg.QPS, cfg.Burst = -1, 0 // the admin client used by tests is not rate limited
	c.Config = cfg
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	if err := WriteKubeconfig(cfg, c.Kubeconfig); err != nil {
		return nil, err
	}

	if opts.Webhook {
		if err := c.keepServingCert(); err != nil {
			return nil, err
		}
		if err := c.installStatusPolicy(ctx); err != nil {
			return nil, err
		}
	}
	if opts.ControllerManager {
		if err := c.startControllerManager(ctx, assets, opts.Log); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// WriteKubeconfig writes cfg (certificate authentication) as a kubeconfig.
func WriteKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "admin"}
	kc.CurrentContext = "local"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}

func (c *Cluster) startControllerManager(ctx context.Context, assets string, log io.Writer) error {
	if log == nil {
		log = io.Discard
	}
	user, err := c.env.AddUser(envtest.User{Name: "system:kube-controller-manager", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("provisioning kube-controller-manager user: %w", err)
	}
	kubeconfig := filepath.Join(c.Dir, "kcm", "kubeconfig")
	if err := WriteKubeconfig(user.Config(), kubeconfig); err != nil {
		return err
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	c.kcm = exec.Command(filepath.Join(assets, "kube-controller-manager"),
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
		"--controllers="+strings.Join(ControllerManagerControllers, ","),
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--cert-dir="+filepath.Join(c.Dir, "kcm"),
		// The garbage collector and aggregation controller react to
		// informer events; a short resync is not needed, but a fast
		// namespace sync keeps tests that delete namespaces quick.
		"--concurrent-gc-syncs=20",
		"--concurrent-namespace-syncs=10",
		"--v=1",
	)
	c.kcm.Stdout, c.kcm.Stderr = log, log
	c.kcm.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := c.kcm.Start(); err != nil {
		return fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	c.kcmDone = make(chan struct{})
	go func() { _ = c.kcm.Wait(); close(c.kcmDone) }()

	// Healthy means serving /healthz and having aggregated the built-in
	// admin ClusterRole (proof that the aggregation controller runs).
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback self-signed
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-c.kcmDone:
			return errors.New("kube-controller-manager exited during start-up; see its log")
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if healthy(hc, fmt.Sprintf("https://127.0.0.1:%d/healthz", port)) {
			admin, err := cs.RbacV1().ClusterRoles().Get(ctx, "admin", metav1.GetOptions{})
			if err == nil && aggregated(admin) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return errors.New("kube-controller-manager did not become healthy within 2m")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func aggregated(cr *rbacv1.ClusterRole) bool {
	return cr.AggregationRule != nil && len(cr.Rules) > 0
}

func healthy(hc *http.Client, url string) bool {
	resp, err := hc.Get(url)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

// Stop stops every process of the control plane and removes a temporary
// state directory.
func (c *Cluster) Stop() error {
	var errs []error
	if c.kcm != nil && c.kcm.Process != nil {
		_ = c.kcm.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.kcmDone:
		case <-time.After(20 * time.Second):
			_ = c.kcm.Process.Kill()
			<-c.kcmDone
		}
	}
	if c.env != nil {
		if err := c.env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping etcd and kube-apiserver: %w", err))
		}
	}
	if c.tempDir {
		errs = append(errs, os.RemoveAll(c.Dir))
	}
	return errors.Join(errs...)
}

// AddUser returns a rest.Config that authenticates as the named user in the
// given groups (client certificate), for tests that act as a user.
func (c *Cluster) AddUser(name string, groups ...string) (*rest.Config, error) {
	u, err := c.env.AddUser(envtest.User{Name: name, Groups: groups}, c.Config)
	if err != nil {
		return nil, err
	}
	return u.Config(), nil
}

// ClusterExtensionGVR is the resource of ClusterExtensions.
var ClusterExtensionGVR = schema.GroupVersionResource{Group: "olm.operatorframework.io", Version: "v1", Resource: "clusterextensions"}
