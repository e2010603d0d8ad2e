package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// lockedBuffer is a bytes.Buffer a process writes while a test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// lineWith returns the first line of out that contains every part.
func lineWith(out string, parts ...string) string {
	for _, line := range strings.Split(out, "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return line
		}
	}
	return ""
}

// TestKubectlOriaStatusWatch: `kubectl oria status EXT --watch` prints the
// table, then a line for each change of one of the extension's
// RBACPolicies: a time-bound policy created, Bound (a SubjectAccessReview
// allows), Expired (it denies), deleted; a policy of another extension
// prints nothing; Ctrl-C ends it with exit code 0.
func TestKubectlOriaStatusWatch(t *testing.T) {
	testutil.NeedCluster(t)
	ns := createNamespace(t, "watch", nil)
	crd := extensionWithAPI(t, oriav1alpha1.RBACModeFineGrained)
	other := extensionWithAPI(t, oriav1alpha1.RBACModeFineGrained)
	ext := crd.Labels[oriav1alpha1.LabelOLMOwnerName]
	waitExtensionCondition(t, ext, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
	kubectlOria(t, "version", "--client") // builds the plugin

	var stdout, stderr lockedBuffer
	cmd := exec.Command(pluginBin, "status", ext, "--watch")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, stdout.String(), "RBACManaged=True FineGrained")
	}, testutil.Timeout, testutil.Interval, "the table first")
	table := stdout.String()
	t.Logf("the table:\n%s", table)

	user := testutil.UniqueName("watched")
	list := testutil.Access{User: user, Verb: "list", Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural, Namespace: ns}
	policy := func(name, extension string, expiresAt time.Time) *oriav1alpha1.RBACPolicy {
		return &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: extension, Access: oriav1alpha1.AccessView,
				Subjects: []rbacv1.Subject{testutil.User(user)}, Namespaces: []string{ns},
				ExpiresAt: &metav1.Time{Time: expiresAt.Truncate(time.Second)}}}
	}
	p := policy(testutil.UniqueName("watch"), ext, time.Now().Add(15*time.Second))
	ignored := policy(testutil.UniqueName("watch-other"), other.Labels[oriav1alpha1.LabelOLMOwnerName], time.Now().Add(time.Hour))
	cleanup(t, p, ignored)
	testutil.Create(t, k8sClient, ignored)
	testutil.Create(t, k8sClient, p)

	waitLine := func(parts ...string) string {
		t.Helper()
		var line string
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			line = lineWith(strings.TrimPrefix(stdout.String(), table), parts...)
			assert.NotEmpty(c, line, "no line with %q in:\n%s", parts, stdout.String())
		}, testutil.Timeout, 100*time.Millisecond)
		return line
	}
	t.Log(waitLine(p.Name, "Ready=True Bound"))
	assert.True(t, can(t, list), "Bound: a SubjectAccessReview allows")
	t.Log(waitLine(p.Name, "Expired"))
	eventuallyAccess(t, false, list)
	require.NoError(t, k8sClient.Delete(t.Context(), p))
	t.Log(waitLine(p.Name, "Deleted"))
	out := stdout.String()
	assert.NotContains(t, out, ignored.Name, "a policy of another extension is not shown")
	assert.NotContains(t, strings.TrimPrefix(out, table), "EXTENSION", "lines, without a header")

	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	select {
	case err := <-exited:
		exited <- err
		assert.NoError(t, err, "Ctrl-C ends the watch with exit code 0; stderr: %s", stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not end on Ctrl-C")
	}
	t.Logf("kubectl oria status --watch:\n%s", out)
}
