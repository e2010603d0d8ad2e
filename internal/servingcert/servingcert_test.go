package servingcert

import (
	"context"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

func TestParseMode(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    Mode
		wantErr bool
	}{
		{"internal", Internal, false},
		{"external", External, false},
		{"", "", true},
		{"Internal", "", true},
		{"cert-manager", "", true},
	} {
		got, err := ParseMode(c.in)
		if got != c.want || (err != nil) != c.wantErr {
			t.Errorf("ParseMode(%q) = %q, %v; want %q, error %v", c.in, got, err, c.want, c.wantErr)
		}
	}
}

func TestOptions(t *testing.T) {
	o := Options{Namespace: "oria-system", SecretName: DefaultSecretName, ServiceName: DefaultServiceName,
		WebhookConfigurationName: DefaultWebhookConfigurationName, CertDir: "/certs", Port: 9443}
	if err := o.Validate(); err != nil {
		t.Errorf("complete options: %v", err)
	}
	if diff := cmp.Diff("oria-webhook-service.oria-system.svc", o.DNSName()); diff != "" {
		t.Errorf("DNSName (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"oria-webhook-service.oria-system.svc.cluster.local"}, o.ExtraDNSNames()); diff != "" {
		t.Errorf("ExtraDNSNames (-want +got):\n%s", diff)
	}
	for name, change := range map[string]func(*Options){
		"namespace":     func(o *Options) { o.Namespace = "" },
		"secret":        func(o *Options) { o.SecretName = "" },
		"service":       func(o *Options) { o.ServiceName = "" },
		"configuration": func(o *Options) { o.WebhookConfigurationName = "" },
		"cert dir":      func(o *Options) { o.CertDir = "" },
		"port":          func(o *Options) { o.Port = 0 },
	} {
		bad := o
		change(&bad)
		if err := bad.Validate(); err == nil {
			t.Errorf("no %s: no error", name)
		}
	}
}

func TestTrusted(t *testing.T) {
	const dns = "oria-webhook-service.oria-system.svc"
	ca, other := newCA(t), newCA(t)
	now := time.Now()
	_, _, leaf := ca.serving(t, dns, now.Add(-time.Minute), now.Add(time.Hour))
	_, _, otherLeaf := other.serving(t, dns, now.Add(-time.Minute), now.Add(time.Hour))
	_, _, wrongName := ca.serving(t, "elsewhere.oria-system.svc", now.Add(-time.Minute), now.Add(time.Hour))
	_, _, expired := ca.serving(t, dns, now.Add(-2*time.Hour), now.Add(-time.Hour))
	hook := func(bundles ...[]byte) *admissionregistrationv1.ValidatingWebhookConfiguration {
		h := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		h.Name = "guard"
		for _, b := range bundles {
			h.Webhooks = append(h.Webhooks, admissionregistrationv1.ValidatingWebhook{Name: "w", ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: b}})
		}
		return h
	}
	both := append(append([]byte{}, other.certPEM...), ca.certPEM...)
	for _, c := range []struct {
		name string
		hook *admissionregistrationv1.ValidatingWebhookConfiguration
		leaf *x509.Certificate
		ok   bool
	}{
		{"signed by the caBundle's CA", hook(ca.certPEM), leaf, true},
		{"a bundle of two CAs", hook(both), leaf, true},
		{"another CA", hook(ca.certPEM), otherLeaf, false},
		{"another name", hook(ca.certPEM), wrongName, false},
		{"expired", hook(ca.certPEM), expired, false},
		{"no caBundle yet", hook(nil), leaf, false},
		{"one webhook without", hook(ca.certPEM, nil), leaf, false},
		{"one webhook of another CA", hook(ca.certPEM, other.certPEM), leaf, false},
		{"no webhooks", hook(), leaf, false},
		{"nothing presented", hook(ca.certPEM), nil, false},
	} {
		var chain []*x509.Certificate
		if c.leaf != nil {
			chain = append(chain, c.leaf)
		}
		if err := trusted(c.hook, chain, dns, now); (err == nil) != c.ok {
			t.Errorf("%s: trusted = %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

func TestVerify(t *testing.T) {
	const dns = "oria-webhook-service.oria-system.svc"
	ca, other := newCA(t), newCA(t)
	now := time.Now()
	cert, key, _ := ca.serving(t, dns, now.Add(-time.Minute), now.Add(time.Hour))
	_, otherKey, _ := ca.serving(t, dns, now.Add(-time.Minute), now.Add(time.Hour))
	for _, c := range []struct {
		name          string
		ca, cert, key []byte
		ok            bool
	}{
		{"valid", ca.certPEM, cert, key, true},
		{"another CA", other.certPEM, cert, key, false},
		{"another key", ca.certPEM, cert, otherKey, false},
		{"corrupted CA", []byte("not a certificate"), cert, key, false},
		{"empty (a Secret being filled)", nil, nil, nil, false},
	} {
		if err := verify(c.ca, c.cert, c.key, dns, now); (err == nil) != c.ok {
			t.Errorf("%s: verify = %v, want ok=%v", c.name, err, c.ok)
		}
	}
	if err := verify(ca.certPEM, cert, key, "elsewhere.svc", now); err == nil {
		t.Error("a certificate for another name verified")
	}
}

func TestServeWhenReady(t *testing.T) {
	ready := make(chan struct{})
	inner := &fakeServer{started: make(chan struct{})}
	srv := (&Manager{ready: ready}).ServeWhenReady(inner)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 1)
	go func() { errs <- srv.Start(ctx) }()
	select {
	case <-inner.started:
		t.Fatal("the server started before the certificate was in place")
	case <-time.After(50 * time.Millisecond):
	}
	close(ready)
	select {
	case <-inner.started:
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not start once the certificate was in place")
	}
	cancel()
	if err := <-errs; err != nil {
		t.Fatal(err)
	}

	// Stopped before the certificate was in place: Start returns.
	srv = (&Manager{ready: make(chan struct{})}).ServeWhenReady(&fakeServer{started: make(chan struct{})})
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := srv.Start(ctx2); err != nil {
		t.Fatal(err)
	}
}

type fakeServer struct {
	webhook.Server
	started chan struct{}
}

func (f *fakeServer) Start(ctx context.Context) error {
	close(f.started)
	<-ctx.Done()
	return nil
}

func TestClearFiles(t *testing.T) {
	dir := t.TempDir()
	if err := writeFiles(dir, map[string][]byte{CertName: []byte("old"), KeyName: []byte("old-key")}); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, "unrelated"), "kept")
	if err := clearFiles(dir); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"unrelated"}, names(t, dir)); diff != "" {
		t.Errorf("after clearFiles (-want +got):\n%s", diff)
	}
	created := filepath.Join(t.TempDir(), "a", "b")
	if err := clearFiles(created); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(created); err != nil {
		t.Errorf("clearFiles does not create the directory: %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	mustWrite(t, file, "x")
	if err := clearFiles(file); err == nil {
		t.Error("a file as the certificate directory: no error")
	}
}

func TestWriteFiles(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, CertName), "a regular file from elsewhere")
	for i, content := range []string{"first", "second", "third"} {
		if err := writeFiles(dir, map[string][]byte{CertName: []byte(content + "-cert"), KeyName: []byte(content + "-key")}); err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]string{CertName: content + "-cert", KeyName: content + "-key"} {
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil || string(got) != want {
				t.Errorf("write %d: %s = %q, %v; want %q", i, name, got, err, want)
			}
			if target, err := os.Readlink(filepath.Join(dir, name)); err != nil || target != filepath.Join(dataLink, name) {
				t.Errorf("write %d: %s links to %q, %v; want %s", i, name, target, err, filepath.Join(dataLink, name))
			}
		}
		// Exactly the current files: ..data, its directory, the two links.
		if got := len(names(t, dir)); got != 4 {
			t.Errorf("write %d: %d entries in the directory (%v), want 4: the previous one is removed", i, got, names(t, dir))
		}
	}
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
