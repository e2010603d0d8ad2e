package install

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/operator-framework/oria/test/localcluster"
)

// oriaDefaultCertDir is oria's default --webhook-cert-dir (cmd/oria).
const oriaDefaultCertDir = "/tmp/k8s-webhook-server/serving-certs"

// TestRenderedInstall checks what the rendered install promises, without a
// cluster: the image, high availability (two replicas, a
// PodDisruptionBudget, spread over nodes, leader election, a rollout that
// keeps both), the memory limit handed to oria, and that the webhook's
// Service reaches the pods' webhook port, with the certificate oria makes
// itself (no cert-manager).
func TestRenderedInstall(t *testing.T) {
	d, c := deployment(t)
	want := testImage
	if os.Getenv("ORIA_INSTALL_YAML") != "" {
		want = os.Getenv("ORIA_INSTALL_IMAGE") // make test-install: IMG
	}
	if want != "" {
		assert.Equal(t, want, c.Image, "the image build-installer was given")
	}
	assert.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy)

	// High availability.
	assert.Equal(t, ptr.To[int32](2), d.Spec.Replicas)
	assert.Contains(t, c.Args, "--leader-elect")
	require.NotNil(t, d.Spec.Strategy.RollingUpdate)
	assert.Equal(t, intstr.FromInt32(0), *d.Spec.Strategy.RollingUpdate.MaxUnavailable, "a rollout never drops a ready replica first")
	podLabels := labels.Set(d.Spec.Template.Labels)
	pdb := as[policyv1.PodDisruptionBudget](t, find(t, "PodDisruptionBudget"))
	assert.Equal(t, d.Namespace, pdb.Namespace)
	assert.Equal(t, ptr.To(intstr.FromInt32(1)), pdb.Spec.MinAvailable)
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	require.NoError(t, err)
	assert.True(t, sel.Matches(podLabels), "the PodDisruptionBudget selects oria's pods")
	spread := d.Spec.Template.Spec.TopologySpreadConstraints
	require.NotEmpty(t, spread, "oria's replicas spread over nodes")
	assert.Equal(t, corev1.LabelHostname, spread[0].TopologyKey)
	sel, err = metav1.LabelSelectorAsSelector(spread[0].LabelSelector)
	require.NoError(t, err)
	assert.True(t, sel.Matches(podLabels))

	// Resources: a memory limit, handed to oria for its Go memory limit.
	limit := c.Resources.Limits[corev1.ResourceMemory]
	request := c.Resources.Requests[corev1.ResourceMemory]
	assert.True(t, limit.Cmp(resource.MustParse("768Mi")) >= 0, "memory limit %s: docs/operations.md sizes the default at 768Mi (one instance over 100,000 namespaces)", limit.String())
	assert.True(t, request.Cmp(limit) <= 0)
	assert.False(t, c.Resources.Requests.Cpu().IsZero(), "a CPU request")
	assert.True(t, c.Resources.Limits.Cpu().IsZero(), "no CPU limit: throttling would slow the guard's answers")
	env := podEnv(t, d, c)
	assert.Equal(t, d.Namespace, env["POD_NAMESPACE"])
	assert.NotEmpty(t, env["ORIA_MEMORY_LIMIT"])
	assert.NotContains(t, env, "GOMEMLIMIT", "oria derives it from ORIA_MEMORY_LIMIT")

	// Security: the Dockerfile's user, non-root, read-only.
	psc := d.Spec.Template.Spec.SecurityContext
	require.NotNil(t, psc)
	assert.Equal(t, ptr.To(true), psc.RunAsNonRoot)
	assert.Equal(t, ptr.To(dockerfileUser(t)), psc.RunAsUser, "runAsUser is the Dockerfile's USER")
	require.NotNil(t, c.SecurityContext)
	assert.Equal(t, ptr.To(true), c.SecurityContext.ReadOnlyRootFilesystem)

	// The guard: webhook -> Service -> the pods' webhook port, with the
	// serving certificate oria makes (checkGuardCertificate).
	hook := as[admissionregistrationv1.ValidatingWebhookConfiguration](t, find(t, "ValidatingWebhookConfiguration"))
	require.Len(t, hook.Webhooks, 1)
	ref := hook.Webhooks[0].ClientConfig.Service
	require.NotNil(t, ref)
	assert.Equal(t, d.Namespace, ref.Namespace)
	assert.Equal(t, admissionregistrationv1.Fail, *hook.Webhooks[0].FailurePolicy)
	var svc *corev1.Service
	for _, u := range install {
		if u.GetKind() == "Service" && u.GetName() == ref.Name && u.GetNamespace() == ref.Namespace {
			svc = as[corev1.Service](t, u)
		}
	}
	require.NotNil(t, svc, "the webhook's Service %s/%s", ref.Namespace, ref.Name)
	assert.True(t, labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels), "the webhook's Service selects oria's pods")
	require.Len(t, svc.Spec.Ports, 1)
	assert.True(t, slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
		return p.Name == svc.Spec.Ports[0].TargetPort.String() && p.ContainerPort == 9443
	}), "the Service's targetPort %s is the container's port 9443 (oria's default --webhook-port)", svc.Spec.Ports[0].TargetPort.String())
	checkGuardCertificate(t, install, d, c, hook)
	t.Logf("install: %d objects, image %s, %d replicas, memory %s/%s", len(install), c.Image, *d.Spec.Replicas, request.String(), limit.String())
}

// dockerfileUser is the numeric user of the Dockerfile's final USER line.
func dockerfileUser(t testing.TB) int64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^USER (\d+)(?::\d+)?\s*$`).FindAllStringSubmatch(dockerfile(t), -1)
	require.NotEmpty(t, m, "the Dockerfile sets a numeric USER")
	var uid int64
	for _, c := range m[len(m)-1][1] {
		uid = uid*10 + int64(c-'0')
	}
	return uid
}

func dockerfile(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(localcluster.RepoRoot(), "Dockerfile"))
	require.NoError(t, err)
	return string(b)
}

// TestDockerfile checks the Dockerfile without building it (no container
// engine here): pinned base images, a reproducible (-trimpath) static build
// that stamps the version, every COPY source inside the build context that
// .dockerignore leaves, and a small context without .local/ (the local
// control plane's CA and signing keys).
func TestDockerfile(t *testing.T) {
	df := dockerfile(t)
	args := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^ARG (\w+)=(\S+)$`).FindAllStringSubmatch(df, -1) {
		args[m[1]] = m[2]
	}
	froms := regexp.MustCompile(`(?m)^FROM (\S+)`).FindAllStringSubmatch(df, -1)
	require.Len(t, froms, 2, "a build stage and a runtime stage")
	pinned := regexp.MustCompile(`^[a-z0-9./-]+(:[\w.-]*\d[\w.-]*)?(@sha256:[0-9a-f]{64})?$`)
	for _, m := range froms {
		img := m[1]
		if strings.HasPrefix(img, "${") {
			img = args[strings.Trim(img, "${}")]
		}
		if img == "scratch" {
			continue // nothing to pin
		}
		assert.Regexp(t, pinned, img, "base image %s", m[1])
		assert.True(t, strings.Contains(img, "@sha256:") || regexp.MustCompile(`:[\w-]*\d`).MatchString(img), "base image %s is pinned to a version", img)
		assert.NotContains(t, img, ":latest")
	}
	goVersion := regexp.MustCompile(`golang:(\d+\.\d+\.\d+)`).FindStringSubmatch(args["GO_IMAGE"])
	require.NotNil(t, goVersion, "GO_IMAGE names an exact Go version")
	gomod, err := os.ReadFile(filepath.Join(localcluster.RepoRoot(), "go.mod"))
	require.NoError(t, err)
	need := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(gomod)
	require.NotNil(t, need)
	assert.GreaterOrEqual(t, versionKey(goVersion[1]), versionKey(string(need[1])), "the Go image is at least go.mod's go %s", need[1])

	build := regexp.MustCompile(`(?s)RUN CGO_ENABLED=0 .*?go build (.*?)-o /oria \./cmd/oria`).FindStringSubmatch(df)
	require.NotNil(t, build, "a static build of ./cmd/oria")
	assert.Contains(t, build[1], "-trimpath")
	assert.Contains(t, build[1], "-X main.version=${VERSION}")

	ignore := readDockerignore(t)
	var sources []string
	for _, m := range regexp.MustCompile(`(?m)^COPY (?:--\S+ )?(.+) \S+$`).FindAllStringSubmatch(df, -1) {
		if !strings.Contains(m[0], "--from=") {
			sources = append(sources, strings.Fields(m[1])...)
		}
	}
	require.NotEmpty(t, sources)
	for _, s := range sources {
		assert.False(t, ignore.excluded(strings.TrimSuffix(s, "/")), "COPY %s: excluded from the build context by .dockerignore", s)
	}
	size, files, leaked := ignore.context(t, localcluster.RepoRoot())
	assert.Empty(t, leaked, "files in the build context the Dockerfile does not copy")
	assert.Less(t, size, int64(20<<20), "the build context is what the Dockerfile copies")
	assert.True(t, ignore.excluded(".local/certs/ca.key"), ".local/ is never sent to a builder")
	t.Logf("build context: %d files, %.1f MB", files, float64(size)/(1<<20))
}

// versionKey makes "1.26.3" comparable ("001.026.003").
func versionKey(v string) string {
	var out []string
	for _, p := range strings.Split(v, ".") {
		out = append(out, strings.Repeat("0", max(0, 3-len(p)))+p)
	}
	return strings.Join(out, ".")
}

// TestVersionStamped builds oria and the kubectl plugin with the
// Makefile's and Dockerfile's -ldflags and runs their version commands.
func TestVersionStamped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries")
	}
	const v = "v9.9.9-install-test"
	dir := t.TempDir()
	for _, b := range []struct{ pkg, x string }{
		{"./cmd/oria", "main.version"},
		{"./cmd/kubectl-oria", "github.com/operator-framework/oria/internal/cli.Version"},
	} {
		out := filepath.Join(dir, filepath.Base(b.pkg))
		// The release's other flags (-trimpath, CGO_ENABLED=0) are checked
		// in the Dockerfile and the Makefile; building with them here would
		// recompile every dependency (minutes on 2 cores, a timeout under
		// load), where the stamp alone reuses the build cache.
		cmd := exec.Command("go", "build", "-ldflags", "-X "+b.x+"="+v, "-o", out, b.pkg)
		cmd.Dir = localcluster.RepoRoot()
		msg, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", msg)
		arg := "--version"
		if strings.HasSuffix(b.pkg, "kubectl-oria") {
			arg = "version"
		}
		got, err := exec.Command(out, arg).CombinedOutput()
		require.NoError(t, err, "%s", got)
		assert.Contains(t, string(got), v, "%s %s", b.pkg, arg)
		t.Logf("%s %s: %s", filepath.Base(b.pkg), arg, strings.TrimSpace(string(got)))
	}
}
