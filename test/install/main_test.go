// Package install tests oria as `make build-installer` ships it: the rendered
// dist/install.yaml (config/default, with an image) on the local control
// plane, and the oria binary run exactly as that install's Deployment runs
// it — as its ServiceAccount (a token from TokenRequest, so with the
// installed RBAC alone), with its arguments and its downward-API
// environment, making its own serving certificate (--cert-management=internal:
// no cert-manager) — once (every controller and the escalation guard), as
// two replicas (leader election: a killed leader, a graceful stop, admission
// meanwhile, one certificate), through certificate rotations, and starting
// before its Secret exists.
//
// The API server calls the guard through the install's own
// ValidatingWebhookConfiguration and Service (webhook.go): the Service is
// made an ExternalName for 127.0.0.1 (no pod network here) and the webhook's
// port a free one, so that the API server checks the certificate for the
// Service's name, as on a cluster.
//
// By default the suite renders the install itself, with the same code as
// `make build-installer IMG=example.com/oria:v0.1.0`; ORIA_INSTALL_YAML=path
// tests a file rendered before, whose image ORIA_INSTALL_IMAGE names (`make
// test-install IMG=...` renders dist/install.yaml and tests it).
package install

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/hack/installer"
	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/localcluster"
	"github.com/operator-framework/oria/test/oriaproc"
)

// testImage is the image the suite renders the install with, as the issue's
// `make build-installer IMG=example.com/oria:v0.1.0`.
const testImage = "example.com/oria:v0.1.0"

var (
	// cluster is the local control plane, with kube-controller-manager and
	// (from setup) the install's webhook configuration (failurePolicy Fail).
	cluster *localcluster.Cluster
	// k8sClient is a cluster-admin client with oria's scheme.
	k8sClient client.Client
	// install holds the objects of the rendered install, in its order.
	install []*unstructured.Unstructured
	// oriaBin is the oria binary; workDir holds it, logs and kubeconfigs.
	oriaBin, workDir string
)

func TestMain(m *testing.M) {
	testutil.Timeout, testutil.Interval = 2*time.Minute, 100*time.Millisecond
	flag.Parse()
	var err error
	if install, err = renderedInstall(); err != nil {
		fmt.Fprintf(os.Stderr, "rendering the install: %v\n", err)
		os.Exit(1)
	}
	testutil.RunMain(m, &cluster, localcluster.Options{ControllerManager: true}, setup)
}

// renderedInstall decodes $ORIA_INSTALL_YAML, or renders config/default
// with testImage.
func renderedInstall() ([]*unstructured.Unstructured, error) {
	var b []byte
	var err error
	if p := os.Getenv("ORIA_INSTALL_YAML"); p != "" {
		b, err = os.ReadFile(p)
	} else {
		b, err = installer.Render(localcluster.RepoRoot(), installer.DefaultDir, testImage)
	}
	if err != nil {
		return nil, err
	}
	return decodeAll(b)
}

func decodeAll(b []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// setup builds oria and installs, for real, what running it as the
// install's ServiceAccount needs: the Namespace, the ServiceAccount, the
// RBAC, and the escalation guard's webhook configuration and Service
// (installWebhook). (The CRDs are installed by the local control plane; the
// dry-run test checks the rendered ones.)
func setup() (func(int), error) {
	var err error
	if workDir, err = os.MkdirTemp("", "oria-install-"); err != nil {
		return nil, err
	}
	if oriaBin, err = oriaproc.Build(localcluster.RepoRoot(), workDir); err != nil {
		return nil, err
	}
	if k8sClient, err = testutil.AdminClient(cluster); err != nil {
		return nil, err
	}
	ctx := context.Background()
	for _, u := range install {
		switch u.GetKind() {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			if err := apply(ctx, u.DeepCopy()); err != nil {
				return nil, fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
			}
		}
	}
	if err := installWebhook(ctx); err != nil {
		return nil, err
	}
	return func(int) { _ = os.RemoveAll(workDir) }, nil
}

// apply applies u as `kubectl apply --server-side` would.
func apply(ctx context.Context, u *unstructured.Unstructured, opts ...client.PatchOption) error {
	return k8sClient.Patch(ctx, u, client.Apply, append([]client.PatchOption{client.FieldOwner("install-test"), client.ForceOwnership}, opts...)...) //nolint:staticcheck // unstructured apply
}

// find returns the install's only object of kind, failing the test unless
// there is exactly one.
func find(t testing.TB, kind string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, u := range install {
		if u.GetKind() == kind {
			found = append(found, u)
		}
	}
	require.Len(t, found, 1, "objects of kind %s in the install", kind)
	return found[0]
}

// as converts an install object into its typed form.
func as[T any](t testing.TB, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out))
	return out
}

// deployment is the install's Deployment and its manager container.
func deployment(t testing.TB) (*appsv1.Deployment, corev1.Container) {
	t.Helper()
	d := as[appsv1.Deployment](t, find(t, "Deployment"))
	require.Len(t, d.Spec.Template.Spec.Containers, 1)
	return d, d.Spec.Template.Spec.Containers[0]
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the
// install's ServiceAccount with a token from TokenRequest, as a pod's
// projected token would.
func serviceAccountKubeconfig(t testing.TB) string {
	t.Helper()
	d, _ := deployment(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Spec.Template.Spec.ServiceAccountName}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	require.NoError(t, k8sClient.SubResource("token").Create(context.Background(), sa, tr), "TokenRequest for %s/%s", sa.Namespace, sa.Name)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: cluster.Config.Host, CertificateAuthorityData: cluster.Config.CAData}
	kc.AuthInfos["oria"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "oria"}
	kc.CurrentContext = "local"
	path := filepath.Join(workDir, testutil.UniqueName("kubeconfig"))
	require.NoError(t, clientcmd.WriteToFile(*kc, path))
	return path
}

// replica is how a test runs one oria pod of the install: its webhook
// port, the name of its log, and its certificate directory (the pod's
// emptyDir; <workDir>/<name>-certs when empty).
type replica struct {
	name        string
	webhookPort int
	certDir     string
}

// startAsDeployment runs oria as the install's Deployment runs it: the
// container's arguments and environment (the downward API evaluated: the
// pod's namespace, the container's memory limit in bytes), as the
// ServiceAccount, and waits until it is ready. Only what differs between a
// pod and a process on this machine is changed: metrics and probes listen on
// free loopback ports (oriaproc), the guard on 127.0.0.1:r.webhookPort, and
// the certificate directory, the Deployment's emptyDir at oria's default
// --webhook-cert-dir (TestRenderedInstall checks the mount), is a directory
// of the replica's own.
func startAsDeployment(t testing.TB, kubeconfig string, r replica) *oriaproc.Process {
	t.Helper()
	args, logPath := asDeployment(t, r)
	p, err := oriaproc.Start(context.Background(), oriaBin, kubeconfig, logPath, args...)
	if err != nil {
		tail(t, logPath)
	}
	require.NoError(t, err, "starting oria as the Deployment (%s)", r.name)
	t.Cleanup(p.Stop)
	return p
}

// asDeployment returns the arguments oria runs with as r (see
// startAsDeployment) and the path of its log, and sets the pod's
// environment for the test.
func asDeployment(t testing.TB, r replica) (args []string, logPath string) {
	t.Helper()
	d, c := deployment(t)
	args = slices.DeleteFunc(slices.Clone(c.Args), func(a string) bool {
		return strings.HasPrefix(a, "--metrics-bind-address=") || strings.HasPrefix(a, "--health-probe-bind-address=")
	})
	if r.certDir == "" {
		r.certDir = filepath.Join(workDir, r.name+"-certs")
	}
	args = append(args, "--webhook-host="+webhookHost, "--webhook-port="+strconv.Itoa(r.webhookPort), "--webhook-cert-dir="+r.certDir)
	for k, v := range podEnv(t, d, c) {
		t.Setenv(k, v) // oriaproc passes this process's environment on
	}
	t.Setenv("GOMEMLIMIT", "")
	return args, filepath.Join(workDir, r.name+".log")
}

// podEnv evaluates the container's environment as the kubelet would: plain
// values, the pod's namespace (fieldRef) and the container's resources
// (resourceFieldRef, in bytes for memory).
func podEnv(t testing.TB, d *appsv1.Deployment, c corev1.Container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil:
			require.Equal(t, "metadata.namespace", e.ValueFrom.FieldRef.FieldPath, "env %s: only the namespace is evaluated here", e.Name)
			env[e.Name] = d.Namespace
		case e.ValueFrom.ResourceFieldRef != nil:
			ref := e.ValueFrom.ResourceFieldRef
			require.Equal(t, "limits.memory", ref.Resource, "env %s: only the memory limit is evaluated here", e.Name)
			limit := c.Resources.Limits[corev1.ResourceMemory]
			require.False(t, limit.IsZero(), "env %s: the container has no memory limit", e.Name)
			env[e.Name] = strconv.FormatInt(limit.Value(), 10)
		default:
			t.Fatalf("env %s: a source this test cannot evaluate", e.Name)
		}
	}
	return env
}

// forbidden matches an API server refusal of oria's own requests in its log.
var forbidden = regexp.MustCompile(`(?i)forbidden`)

// requireNoForbidden fails t if oria's log at path holds a refusal: oria
// must do everything with the install's RBAC alone.
func requireNoForbidden(t testing.TB, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var hits []string
	for _, line := range strings.Split(string(b), "\n") {
		if forbidden.MatchString(line) {
			hits = append(hits, line)
		}
	}
	require.Empty(t, hits, "oria was refused something with the install's RBAC (%s)", path)
}

// tail logs the end of oria's log, to explain a failure.
func tail(t testing.TB, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 60 {
		lines = lines[len(lines)-60:]
	}
	t.Logf("---- end of %s ----\n%s", path, strings.Join(lines, "\n"))
}
