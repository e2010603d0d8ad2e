package cli

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/operator-framework/oria/internal/admission"
	"github.com/operator-framework/oria/internal/manager"
)

var (
	caOnce sync.Once
	caPEM  []byte
)

// testCA is a self-signed CA certificate, PEM-encoded.
func testCA() []byte {
	caOnce.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, BasicConstraintsValid: true,
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			panic(err)
		}
		caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	})
	return caPEM
}

// TestProbeTLS: the certificate served at a URL is verified with the
// caBundle: that of the server's CA verifies it, another does not, and a
// closed port is not reached.
func TestProbeTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	own := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	ctx := context.Background()

	s := probeTLS(ctx, srv.URL+"/validate", own)
	if s.Err != nil || s.VerifyErr != nil || !strings.Contains(s.Subject, "127.0.0.1") || s.NotAfter.IsZero() {
		t.Errorf("with the server's CA: %+v", s)
	}
	if s := probeTLS(ctx, srv.URL+"/validate", testCA()); s.Err != nil || s.VerifyErr == nil {
		t.Errorf("with another CA: %+v, want a verification error", s)
	}
	addr := srv.Listener.Addr().String()
	srv.Close()
	if s := probeTLS(ctx, "https://"+addr+"/validate", own); s.Err == nil {
		t.Errorf("closed: %+v, want a connection error", s)
	}
}

// TestInstallNames: what check looks for is what the install and oria use.
func TestInstallNames(t *testing.T) {
	if LeaseName != manager.LeaderElectionID {
		t.Errorf("LeaseName %q, oria elects with %q", LeaseName, manager.LeaderElectionID)
	}
	if GuardWebhookName != admission.WebhookName {
		t.Errorf("GuardWebhookName %q, the guard is %q", GuardWebhookName, admission.WebhookName)
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "manager", "manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var d appsv1.Deployment
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil || d.Kind != "Deployment" {
			continue
		}
		found = true
		if d.Name != DeploymentName || d.Namespace != DefaultNamespace {
			t.Errorf("config/manager's Deployment is %s/%s, check looks for %s/%s", d.Namespace, d.Name, DefaultNamespace, DeploymentName)
		}
		// The Lease is in the pod's namespace.
		var env []corev1.EnvVar
		for _, c := range d.Spec.Template.Spec.Containers {
			env = append(env, c.Env...)
		}
		ok := false
		for _, e := range env {
			ok = ok || (e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace")
		}
		if !ok {
			t.Error("config/manager's Deployment does not set POD_NAMESPACE from metadata.namespace: the Lease is not where check looks")
		}
	}
	if !found {
		t.Error("no Deployment in config/manager/manager.yaml")
	}
}
