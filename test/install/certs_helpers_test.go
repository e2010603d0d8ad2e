package install

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/servingcert"
	"github.com/operator-framework/oria/internal/testutil"
)

// serving is the escalation guard's certificate at one moment: the
// Secret oria keeps it in, and the certificate a replica presents.
type serving struct {
	uid              types.UID
	ca, cert, key    []byte // ca.crt, tls.crt, tls.key
	caBundle, served []byte // the webhook's caBundle; the presented leaf (DER)
}

// leaf parses the Secret's certificate.
func (s serving) leaf(t require.TestingT) *x509.Certificate { return parsePEM(t, s.cert) }

// secretKey is the Secret of the install's certificate.
func secretKey(t testing.TB) client.ObjectKey {
	d, c := deployment(t)
	return client.ObjectKey{Namespace: d.Namespace, Name: flagValue(c.Args, "--webhook-secret-name", servingcert.DefaultSecretName)}
}

// guardDNSName is the name the API server checks the certificate for: the
// webhook's Service, <service>.<namespace>.svc.
func guardDNSName(t testing.TB) string {
	hook := as[admissionregistrationv1.ValidatingWebhookConfiguration](t, find(t, "ValidatingWebhookConfiguration"))
	ref := hook.Webhooks[0].ClientConfig.Service
	return ref.Name + "." + ref.Namespace + ".svc"
}

// waitServing waits until the replicas on ports all present the Secret's
// certificate, the webhook's caBundle is the Secret's CA, the presented
// certificate verifies against it for the Service's name, and cond holds;
// it returns that state.
func waitServing(t *testing.T, ports []int, cond func(c *assert.CollectT, s serving)) serving {
	t.Helper()
	var got serving
	dns := guardDNSName(t)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		s, err := current(t)
		require.NoError(c, err)
		require.NotEmpty(c, s.cert, "the Secret holds a certificate")
		for _, port := range ports {
			leaf, err := presented(port, dns)
			require.NoError(c, err)
			require.Equal(c, s.leaf(c).Raw, leaf.Raw, "the replica on port %d presents the Secret's certificate", port)
			s.served = leaf.Raw
			require.NoError(c, verifyAgainst(leaf, s.caBundle, dns), "the presented certificate verifies against the caBundle")
		}
		require.Equal(c, string(s.ca), string(s.caBundle), "the webhook's caBundle is the Secret's CA")
		if cond != nil {
			cond(c, s)
		}
		got = s
	}, testutil.Timeout, 50*time.Millisecond)
	return got
}

// current reads the Secret and the webhook's caBundle.
func current(t testing.TB) (serving, error) {
	ctx := context.Background()
	sec := &corev1.Secret{}
	if err := k8sClient.Get(ctx, secretKey(t), sec); err != nil {
		return serving{}, err
	}
	hook := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Name: find(t, "ValidatingWebhookConfiguration").GetName()}, hook); err != nil {
		return serving{}, err
	}
	return serving{uid: sec.UID, ca: sec.Data["ca.crt"], cert: sec.Data["tls.crt"], key: sec.Data["tls.key"],
		caBundle: hook.Webhooks[0].ClientConfig.CABundle}, nil
}

// presented is the certificate the guard on port presents for serverName.
func presented(port int, serverName string) (*x509.Certificate, error) {
	d := &net.Dialer{Timeout: time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort(webhookHost, strconv.Itoa(port)),
		&tls.Config{ServerName: serverName, InsecureSkipVerify: true}) //nolint:gosec // what is presented, verified by the caller
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// verifyAgainst verifies leaf for dnsName against the PEM bundle.
func verifyAgainst(leaf *x509.Certificate, bundle []byte, dnsName string) error {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		return errors.New("no CA in the caBundle")
	}
	_, err := leaf.Verify(x509.VerifyOptions{DNSName: dnsName, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}

func parsePEM(t require.TestingT, b []byte) *x509.Certificate {
	blk, _ := pem.Decode(b)
	require.NotNil(t, blk, "a PEM certificate")
	c, err := x509.ParseCertificate(blk.Bytes)
	require.NoError(t, err)
	return c
}

// signed returns a serving certificate for dnsName valid for validity,
// signed by the CA whose PEM certificate and key are given (a new
// self-signed CA when they are nil), and its key.
func signed(t *testing.T, caPEM, caKeyPEM []byte, dnsName string, validity time.Duration) (certPEM, keyPEM []byte) {
	t.Helper()
	now := time.Now()
	var ca *x509.Certificate
	var caKey any
	if caPEM == nil {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another-ca"}, IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, k.Public(), k)
		require.NoError(t, err)
		ca, caKey = parsePEM(t, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), k
	} else {
		ca = parsePEM(t, caPEM)
		blk, _ := pem.Decode(caKeyPEM)
		require.NotNil(t, blk)
		k, err := x509.ParsePKCS1PrivateKey(blk.Bytes)
		require.NoError(t, err, "cert-controller's CA key (PKCS #1)")
		caKey = k
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(validity)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// probe sends server-side dry-run creates of a ScopeTemplate, as the
// admin, from probeWorkers workers, each every interval (the guard is
// called for dry runs too), and records each answer.
type probe struct {
	mu      sync.Mutex
	answers []answer
	stop    chan struct{}
	done    chan struct{}
}

type answer struct {
	at  time.Time
	err error
}

func startProbe(t *testing.T, interval time.Duration) *probe {
	t.Helper()
	p := &probe{stop: make(chan struct{}), done: make(chan struct{})}
	name := testutil.UniqueName("probe")
	tmpl := testutil.ScopeTemplate(name, []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name})
	var wg sync.WaitGroup
	for range probeWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for {
				err := k8sClient.Create(context.Background(), tmpl.DeepCopy(), client.DryRunAll)
				p.mu.Lock()
				p.answers = append(p.answers, answer{at: time.Now(), err: err})
				p.mu.Unlock()
				select {
				case <-p.stop:
					return
				case <-tick.C:
				}
			}
		}()
	}
	go func() { wg.Wait(); close(p.done) }()
	t.Cleanup(p.Stop)
	return p
}

// probeWorkers send the probe's requests, each every interval.
const probeWorkers = 2

// Stop stops the probe (again: nothing).
func (p *probe) Stop() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// between returns how many answers came in [from, to] and those that were
// errors.
func (p *probe) between(from, to time.Time) (n int, failed []answer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	slices.SortFunc(p.answers, func(a, b answer) int { return a.at.Compare(b.at) })
	for _, a := range p.answers {
		if a.at.Before(from) || a.at.After(to) {
			continue
		}
		n++
		if a.err != nil {
			failed = append(failed, a)
		}
	}
	return n, failed
}

// span is how long the failures lasted, first to last.
func span(failed []answer) time.Duration {
	if len(failed) == 0 {
		return 0
	}
	return failed[len(failed)-1].at.Sub(failed[0].at)
}

// judged checks that the guard judges a delegated user's writes: a user
// with create/update/patch/delete on oria's kinds and admin of a namespace
// of their own is refused, with the guard's message, a template granting
// every permission, and admitted one binding system:basic-user (whose
// permissions everyone holds).
func judged(t *testing.T, prefix string) {
	t.Helper()
	name := testutil.UniqueName(prefix)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "oria-delegate-" + name}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{oriav1alpha1.GroupVersion.Group}, Resources: []string{"scopetemplates", "scopeinstances", "rbacpolicies"},
		Verbs: []string{"create", "update", "patch", "delete"}}}}
	testutil.Create(t, k8sClient, role)
	testutil.Create(t, k8sClient, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{testutil.User(name)}})
	own := testutil.CreateNamespace(t, k8sClient, prefix, nil)
	testutil.Create(t, k8sClient, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: own, Name: name + "-admin"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects: []rbacv1.Subject{testutil.User(name)}})
	cfg, err := cluster.AddUser(name)
	require.NoError(t, err)
	as, err := client.New(cfg, client.Options{Scheme: k8sClient.Scheme()})
	require.NoError(t, err)

	all := []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}
	grab := testutil.ScopeTemplate(name+"-all", []oriav1alpha1.ClusterRoleTemplate{{Name: name + "-all", Rules: all}}, testutil.User(name))
	fine := testutil.ScopeTemplate(name+"-basic", []oriav1alpha1.ClusterRoleTemplate{{Name: "system:basic-user"}}, testutil.User(name))
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), fine) })
	require.EventuallyWithT(t, func(c *assert.CollectT) { // the user's rights reach the authorizer's cache
		err := as.Create(context.Background(), grab.DeepCopy())
		require.Error(c, err, "the guard refuses what %s could not create themselves", name)
		assert.Contains(c, err.Error(), fmt.Sprintf("admission webhook %q denied the request", "escalation-guard.oria.operatorframework.io"))
		assert.Contains(c, err.Error(), `needs "escalate"`)
		err = as.Create(context.Background(), fine.DeepCopy())
		if err != nil && !strings.Contains(err.Error(), "already exists") {
			assert.NoError(c, err, "the guard admits what %s may grant", name)
		}
	}, testutil.Timeout, testutil.Interval)
}

// sameBytes reports whether a and b are equal (for readable assertions).
func sameBytes(a, b []byte) bool { return bytes.Equal(a, b) }
