package install

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/servingcert"
	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/localcluster"
	"github.com/operator-framework/oria/test/oriaproc"
)

// TestCertificateRotation runs one replica as the install runs it (no
// cert-manager) and has its certificate replaced three ways, while a probe
// sends dry-run writes through the guard (two clients, each every 10 ms):
//   - a certificate near expiry (signed by the same CA, expiring within the
//     rotator's lookahead) is replaced by a new one, the CA kept: no
//     admission request fails;
//   - a corrupted CA in the Secret is replaced by a new CA and certificate,
//     and the caBundle follows;
//   - a deleted Secret is created again, with a new CA, and the caBundle
//     follows.
//
// After each, the replica presents the Secret's certificate, the caBundle
// is the Secret's CA, and a delegated user's writes are judged by the
// guard. It prints how long each replacement took and how long admission
// failed meanwhile.
func TestCertificateRotation(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	p := startAsDeployment(t, serviceAccountKubeconfig(t), replica{name: "rotation", webhookPort: webhookPort})
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("ORIA_TEST_VERBOSE") != "" {
			tail(t, p.LogPath)
		}
	})
	ports, dns := []int{webhookPort}, guardDNSName(t)
	start := waitServing(t, ports, nil)
	judged(t, "rotation")
	secret := &corev1.Secret{}
	require.NoError(t, k8sClient.Get(ctx, secretKey(t), secret))
	pr := startProbe(t, 10*time.Millisecond)

	// A certificate near expiry: renewed under the same CA.
	nearCert, nearKey := signed(t, secret.Data["ca.crt"], secret.Data["ca.key"], dns, time.Hour)
	renewBegan := time.Now()
	testutil.Update(t, k8sClient, secret, func() { secret.Data["tls.crt"], secret.Data["tls.key"] = nearCert, nearKey })
	renewed := waitServing(t, ports, func(c *assert.CollectT, s serving) {
		assert.NotEqual(c, string(nearCert), string(s.cert), "the certificate near expiry is replaced")
		assert.True(c, s.leaf(c).NotAfter.After(time.Now().Add(servingcert.ServerCertDuration-servingcert.LookaheadInterval)), "by one valid for a year")
	})
	renewTook := time.Since(renewBegan)
	assert.Equal(t, string(start.ca), string(renewed.ca), "the CA is kept")
	judged(t, "renewed")

	// A corrupted CA: a new CA and certificate.
	corruptBegan := time.Now()
	testutil.Update(t, k8sClient, secret, func() { secret.Data["ca.crt"] = []byte("not a certificate") })
	repaired := waitServing(t, ports, func(c *assert.CollectT, s serving) {
		assert.NotEqual(c, string(renewed.ca), string(s.ca), "a new CA")
	})
	corruptTook := time.Since(corruptBegan)
	judged(t, "repaired")

	// A deleted Secret: created again, with a new CA.
	deleteBegan := time.Now()
	require.NoError(t, k8sClient.Delete(ctx, secret))
	recreated := waitServing(t, ports, func(c *assert.CollectT, s serving) {
		assert.NotEqual(c, repaired.uid, s.uid, "the Secret is created again")
		assert.NotEqual(c, string(repaired.ca), string(s.ca), "a new CA")
	})
	deleteTook := time.Since(deleteBegan)
	judged(t, "recreated")
	pr.Stop()
	assert.Equal(t, recreated.uid, mustSecret(t).UID)

	end := time.Now()
	phases := []struct {
		name     string
		from, to time.Time
		took     time.Duration
	}{
		{"renewal (same CA)", renewBegan, corruptBegan, renewTook},
		{"corrupted CA replaced", corruptBegan, deleteBegan, corruptTook},
		{"deleted Secret recreated", deleteBegan, end, deleteTook},
	}
	msg := "certificate rotation:"
	for i, ph := range phases {
		n, failed := pr.between(ph.from, ph.to)
		msg += fmt.Sprintf(" %s in %.2f s, %d of %d admission requests failed (for %d ms);", ph.name, ph.took.Seconds(), len(failed), n, span(failed).Milliseconds())
		if len(failed) > 0 {
			t.Logf("%s: first failure: %v", ph.name, failed[0].err)
		}
		if i == 0 {
			assert.Empty(t, failed, "a renewal under the same CA does not interrupt admission")
		}
		assert.Less(t, span(failed), 5*time.Second, "%s: admission fails only while the API server takes the new caBundle", ph.name)
	}
	t.Log(msg)
	fmt.Fprintln(os.Stderr, msg)
	requireNoForbidden(t, p.LogPath)
}

// TestCertificateBeforeSecret starts a replica while its Secret does not
// exist, with the certificate of the Secret just deleted in its certificate
// directory (what a container restarted in its pod finds in its emptyDir).
// Until the replica has made the Secret, the certificate and the caBundle,
// /readyz answers not ready, and the replica never presents a certificate
// other than the Secret's, nor one the caBundle does not verify; every
// admission request meanwhile is refused for want of a server (the webhook
// fails closed), never answered over a certificate the API server does not
// trust. Then a delegated user's writes are judged.
func TestCertificateBeforeSecret(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	dns, key := guardDNSName(t), secretKey(t)
	certDir := filepath.Join(workDir, "before-secret-certs")
	require.NoError(t, os.MkdirAll(certDir, 0o700))
	old := &corev1.Secret{}
	staleCert, staleKey := signed(t, nil, nil, dns, time.Hour) // run alone: no replica made the Secret yet
	if err := k8sClient.Get(ctx, key, old); err == nil {
		if len(old.Data["tls.crt"]) > 0 {
			staleCert, staleKey = old.Data["tls.crt"], old.Data["tls.key"]
		}
		require.NoError(t, k8sClient.Delete(ctx, old))
	}
	testutil.EventuallyGone(t, k8sClient, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
	require.NoError(t, os.WriteFile(filepath.Join(certDir, "tls.crt"), staleCert, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(certDir, "tls.key"), staleKey, 0o600))
	stale := parsePEM(t, staleCert)

	args, logPath := asDeployment(t, replica{name: "before-secret", webhookPort: webhookPort, certDir: certDir})
	kubeconfig := serviceAccountKubeconfig(t)
	pr := startProbe(t, 10*time.Millisecond)
	began := time.Now()
	p, err := oriaproc.Launch(oriaBin, kubeconfig, logPath, args...)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			tail(t, logPath)
		}
	})
	t.Cleanup(p.Stop)

	var notReady int
	var inPlace, firstServed, ready time.Time
	var violations []string
	httpc := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(time.Minute); ready.IsZero() && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		isReady := false
		require.False(t, p.Exited(), "oria exited; see %s", logPath)
		if resp, err := httpc.Get(p.HealthURL + "/readyz"); err == nil {
			isReady = resp.StatusCode == http.StatusOK
			_ = resp.Body.Close()
			if !isReady {
				notReady++
			}
		}
		if s, err := current(t); err == nil && len(s.cert) > 0 && string(s.ca) == string(s.caBundle) && inPlace.IsZero() {
			inPlace = time.Now()
		}
		if leaf, err := presented(webhookPort, dns); err == nil {
			if firstServed.IsZero() {
				firstServed = time.Now()
			}
			s, err := current(t)
			switch {
			case sameBytes(leaf.Raw, stale.Raw):
				violations = append(violations, "presented the certificate of the deleted Secret")
			case err != nil || len(s.cert) == 0 || !sameBytes(leaf.Raw, s.leaf(t).Raw):
				violations = append(violations, "presented a certificate other than the Secret's")
			case verifyAgainst(leaf, s.caBundle, dns) != nil:
				violations = append(violations, "presented a certificate the caBundle does not verify")
			}
		}
		if isReady {
			ready = time.Now()
			if inPlace.IsZero() {
				violations = append(violations, "ready before the certificate and caBundle were in place")
			}
		}
	}
	require.False(t, ready.IsZero(), "ready within a minute")
	assert.Empty(t, violations)
	assert.Positive(t, notReady, "/readyz answered not ready before the certificate was in place")
	final := waitServing(t, []int{webhookPort}, nil)
	if old.UID != "" {
		assert.NotEqual(t, old.UID, final.uid, "the replica created the Secret")
	}
	pr.Stop()
	n, failed := pr.between(began, time.Now())
	var wrong []string
	for _, a := range failed {
		if msg := a.err.Error(); strings.Contains(msg, "x509") || strings.Contains(msg, "tls:") {
			wrong = append(wrong, msg)
		}
	}
	assert.Empty(t, wrong, "admission requests the API server sent to a certificate it does not trust")
	judged(t, "before-secret")
	msg := fmt.Sprintf("start before the Secret: certificate and caBundle in place after %.2f s, served after %.2f s, ready after %.2f s (%d not-ready answers); %d of %d admission requests refused meanwhile (no server yet), %d of them over a wrong certificate",
		inPlace.Sub(began).Seconds(), firstServed.Sub(began).Seconds(), ready.Sub(began).Seconds(), notReady, len(failed), n, len(wrong))
	t.Log(msg)
	fmt.Fprintln(os.Stderr, msg)
	requireNoForbidden(t, logPath)
}

// TestCertificateFreshPair starts both replicas of the install at once
// while their Secret does not exist, as a first `kubectl apply` does: both
// race to create and fill it, and both end up serving the one certificate
// the Secret holds and the caBundle trusts (the API server calls them
// through the proxy that stands for the Service).
func TestCertificateFreshPair(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	key := secretKey(t)
	if err := k8sClient.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
		require.True(t, apierrors.IsNotFound(err), "deleting the Secret: %v", err)
	}
	testutil.EventuallyGone(t, k8sClient, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
	ports, err := localcluster.FreePorts(2)
	require.NoError(t, err)
	startProxy(t, fmt.Sprintf("%s:%d", webhookHost, webhookPort), fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1]))
	began := time.Now()
	var procs []*oriaproc.Process
	for i, port := range ports {
		args, logPath := asDeployment(t, replica{name: fmt.Sprintf("fresh-%d", i), webhookPort: port})
		p, err := oriaproc.Launch(oriaBin, serviceAccountKubeconfig(t), logPath, args...)
		require.NoError(t, err)
		t.Cleanup(p.Stop)
		procs = append(procs, p)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range procs {
				tail(t, p.LogPath)
			}
		}
	})
	for _, p := range procs {
		require.NoError(t, p.WaitReady(ctx, time.Minute))
	}
	ready := time.Since(began)
	s := waitServing(t, ports, nil)
	judged(t, "fresh-pair")
	t.Logf("two replicas started at once without a Secret: both ready after %.2f s, serving the certificate of Secret %s", ready.Seconds(), s.uid)
	for _, p := range procs {
		requireNoForbidden(t, p.LogPath)
	}
}

// TestCertificateRBAC asks the API server's authorizer what the installed
// RBAC lets oria's ServiceAccount do with certificates: its own Secret, in
// its own namespace, and its own webhook configuration; nothing else.
func TestCertificateRBAC(t *testing.T) {
	testutil.NeedCluster(t)
	d, _ := deployment(t)
	key := secretKey(t)
	hook := find(t, "ValidatingWebhookConfiguration").GetName()
	sa := "system:serviceaccount:" + d.Namespace + ":" + d.Spec.Template.Spec.ServiceAccountName
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + d.Namespace, "system:authenticated"}
	for _, c := range []struct {
		verb, group, resource, namespace, name string
		want                                   bool
	}{
		{"get", "", "secrets", key.Namespace, key.Name, true},
		{"update", "", "secrets", key.Namespace, key.Name, true},
		{"create", "", "secrets", key.Namespace, "", true},
		{"watch", "", "secrets", key.Namespace, "", true},
		{"get", "", "secrets", key.Namespace, "another", false},
		{"update", "", "secrets", key.Namespace, "another", false},
		{"delete", "", "secrets", key.Namespace, key.Name, false},
		{"get", "", "secrets", "default", key.Name, false},
		{"list", "", "secrets", "", "", false},
		{"update", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", hook, true},
		{"update", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "another", false},
		{"delete", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", hook, false},
		{"update", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", hook, false},
	} {
		a := testutil.Access{User: sa, Groups: groups, Verb: c.verb, Group: c.group, Resource: c.resource, Namespace: c.namespace, Name: c.name}
		got, err := testutil.Allowed(context.Background(), k8sClient, a)
		require.NoError(t, err)
		assert.Equal(t, c.want, got, "%s", a)
	}
}

func mustSecret(t *testing.T) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	require.NoError(t, k8sClient.Get(context.Background(), client.ObjectKey(secretKey(t)), s))
	return s
}
