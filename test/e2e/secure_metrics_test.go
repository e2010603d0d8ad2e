package e2e

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/localcluster"
	"github.com/operator-framework/oria/test/oriaproc"
)

// TestSecureMetrics runs a second oria (a standby replica: the first holds
// the leader lease; without the escalation guard, which the first serves)
// with --metrics-secure, as config/default runs it, and
// scrapes it over HTTPS: without a token it answers 401, with the token of
// a ServiceAccount without the metrics-reader role 403, and with the token
// of one bound to config/rbac/metrics_reader_role.yaml the metrics.
func TestSecureMetrics(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	logPath := filepath.Join(t.TempDir(), "oria.log")
	proc, err := oriaproc.Start(ctx, oria.Cmd.Path, cluster.Kubeconfig, logPath, append(slices.Clone(oriaArgs), "--webhook-port=0", "--metrics-secure=true")...)
	require.NoError(t, err)
	t.Cleanup(func() {
		proc.Stop()
		if t.Failed() {
			testutil.Tail(logPath, 40)
		}
	})
	url := strings.Replace(proc.MetricsURL, "http://", "https://", 1)

	ns := testutil.CreateNamespace(t, k8sClient, "metrics", nil)
	reader := &rbacv1.ClusterRole{}
	b, err := os.ReadFile(filepath.Join(localcluster.RepoRoot(), "config", "rbac", "metrics_reader_role.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, reader))
	reader.Name = testutil.UniqueName("metrics-reader")
	testutil.Create(t, k8sClient, reader)
	for _, sa := range []string{"prometheus", "nobody"} {
		testutil.Create(t, k8sClient, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})
	}
	testutil.Create(t, k8sClient, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: reader.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: ns}},
	})
	// Wait until the authorizer knows the binding: oria's filter caches
	// its answers.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:                  "system:serviceaccount:" + ns + ":prometheus",
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
		}}
		if assert.NoError(c, k8sClient.Create(ctx, sar)) {
			assert.True(c, sar.Status.Allowed)
		}
	}, time.Minute, 100*time.Millisecond)

	get := func(token string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, err.Error()
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		// oria's certificate is self-signed (no --metrics-cert-dir).
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed test certificate
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	// /readyz may answer before the metrics listener is up (it makes its
	// self-signed certificate first).
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		status, body := get("")
		assert.Equal(c, http.StatusUnauthorized, status, body)
	}, 30*time.Second, 100*time.Millisecond)
	status, body := get(token(t, ns, "nobody"))
	assert.Equal(t, http.StatusForbidden, status, body)
	prometheus := token(t, ns, "prometheus")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		status, body := get(prometheus)
		assert.Equal(c, http.StatusOK, status)
		assert.True(c, strings.Contains(body, "oria_managed_objects{"), "the metrics hold oria's own")
	}, time.Minute, 500*time.Millisecond)
	// Plain HTTP is not served.
	status, _ = httpGet(proc.MetricsURL)
	assert.NotEqual(t, http.StatusOK, status)
}

// token returns a short-lived token of the ServiceAccount (TokenRequest).
func token(t *testing.T, ns, name string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	tr := &authenticationv1.TokenRequest{}
	require.NoError(t, k8sClient.SubResource("token").Create(context.Background(), sa, tr))
	require.NotEmpty(t, tr.Status.Token)
	return tr.Status.Token
}
