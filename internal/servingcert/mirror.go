package servingcert

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// caCertName is the Secret's key of the CA certificate (cert-controller's).
const caCertName = "ca.crt"

// mirror writes the Secret's serving certificate into the certificate
// directory whenever it changes and verifies against the Secret's CA for
// the Service's name, and re-creates the Secret, empty, when it is deleted
// (the rotator then fills it with a new CA). A certificate that does not
// verify (the Secret being filled, or corrupted) is not written: the
// server keeps the last good one until the rotator repairs the Secret.
type mirror struct {
	opts   Options
	reader client.Reader
	writer client.Writer
	// written is what the directory holds (reconciles of one controller
	// run one at a time).
	written struct{ cert, key []byte }
}

func (r *mirror) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req.NamespacedName != r.opts.Key() {
		return reconcile.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx)
	s := &corev1.Secret{}
	if err := r.reader.Get(ctx, req.NamespacedName, s); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		log.Info("the serving certificate's Secret is gone: creating it again; the rotator makes a new CA")
		if err := r.writer.Create(ctx, emptySecret(r.opts.Key())); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, fmt.Errorf("creating the serving certificate's Secret %s: %w", r.opts.Key(), err)
		}
		return reconcile.Result{}, nil
	}
	if !s.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	cert, key := s.Data[CertName], s.Data[KeyName]
	if bytes.Equal(cert, r.written.cert) && bytes.Equal(key, r.written.key) {
		return reconcile.Result{}, nil
	}
	if err := verify(s.Data[caCertName], cert, key, r.opts.DNSName(), time.Now()); err != nil {
		log.V(1).Info("the Secret holds no valid serving certificate yet; the rotator makes one", "reason", err.Error())
		return reconcile.Result{}, nil
	}
	if err := writeFiles(r.opts.CertDir, map[string][]byte{CertName: cert, KeyName: key}); err != nil {
		return reconcile.Result{}, err
	}
	r.written.cert, r.written.key = cert, key
	log.Info("serving certificate written", "dir", r.opts.CertDir, "certificate", describe(cert))
	return reconcile.Result{}, nil
}

// verify reports why cert and key are not a serving certificate for
// dnsName signed by ca and valid at now (nil when they are).
func verify(ca, cert, key []byte, dnsName string, now time.Time) error {
	ok, err := rotator.ValidCert(ca, cert, key, dnsName, &serverUsages, now)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("not a valid certificate for %s", dnsName)
	}
	return nil
}

// describe names a PEM certificate in the log: its SHA-256 fingerprint
// (what the readiness check and `openssl x509 -fingerprint -sha256`
// compare) and its expiry.
func describe(certPEM []byte) string {
	b, _ := pem.Decode(certPEM)
	if b == nil {
		return "unparseable"
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return "unparseable"
	}
	sum := sha256.Sum256(c.Raw)
	return fmt.Sprintf("sha256:%s, expires %s", hex.EncodeToString(sum[:8]), c.NotAfter.UTC().Format(time.RFC3339))
}
