package olm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certs is the suite's one certificate authority and the serving
// certificate (127.0.0.1, localhost) that the registry, catalogd and
// operator-controller's metrics share.
type certs struct {
	caDir             string // holds only ca.crt: --pull-cas-dir and --catalogd-cas-dir
	certFile, keyFile string
	pool              *x509.CertPool
	serving           tls.Certificate
}

// newCerts writes a CA and a serving certificate under dir.
func newCerts(dir string) (*certs, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "oria olm e2e CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	c := &certs{
		caDir:    filepath.Join(dir, "cas"),
		certFile: filepath.Join(dir, "tls", "tls.crt"),
		keyFile:  filepath.Join(dir, "tls", "tls.key"),
		pool:     x509.NewCertPool(),
	}
	c.pool.AddCert(ca)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	if c.serving, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, err
	}
	for path, b := range map[string][]byte{
		filepath.Join(c.caDir, "ca.crt"): pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		c.certFile:                       certPEM,
		c.keyFile:                        keyPEM,
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// serverTLS serves the serving certificate.
func (c *certs) serverTLS() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{c.serving}, MinVersion: tls.VersionTLS12}
}

// clientTLS trusts the CA.
func (c *certs) clientTLS() *tls.Config {
	return &tls.Config{RootCAs: c.pool, MinVersion: tls.VersionTLS12}
}
