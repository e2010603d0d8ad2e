package servingcert

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestMirror runs the mirror's reconcile through a Secret's life: gone
// (created, empty), filled by the rotator (written), unchanged (not
// rewritten), corrupted (the last good certificate kept), renewed
// (written).
func TestMirror(t *testing.T) {
	opts := Options{Namespace: "oria-system", SecretName: DefaultSecretName, ServiceName: DefaultServiceName,
		WebhookConfigurationName: DefaultWebhookConfigurationName, CertDir: t.TempDir(), Port: 9443}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	m := &mirror{opts: opts, reader: c, writer: c}
	ctx := context.Background()
	reconcileOnce := func() {
		t.Helper()
		if _, err := m.Reconcile(ctx, reconcile.Request{NamespacedName: opts.Key()}); err != nil {
			t.Fatal(err)
		}
	}
	served := func() string {
		b, err := os.ReadFile(filepath.Join(opts.CertDir, CertName))
		if err != nil {
			return ""
		}
		return string(b)
	}
	setData := func(data map[string][]byte) {
		t.Helper()
		s := &corev1.Secret{}
		if err := c.Get(ctx, opts.Key(), s); err != nil {
			t.Fatal(err)
		}
		s.Data = data
		if err := c.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
	}

	// Gone: created, empty; nothing written.
	reconcileOnce()
	s := &corev1.Secret{}
	if err := c.Get(ctx, opts.Key(), s); err != nil {
		t.Fatalf("the Secret was not created: %v", err)
	}
	if len(s.Data) != 0 || served() != "" {
		t.Errorf("a new Secret holds %d keys and %q is served; want an empty Secret and nothing", len(s.Data), served())
	}
	reconcileOnce() // empty: nothing to write
	if served() != "" {
		t.Errorf("an empty Secret wrote %q", served())
	}

	// Filled: written.
	ca := newCA(t)
	now := time.Now()
	cert, key, _ := ca.serving(t, opts.DNSName(), now.Add(-time.Minute), now.Add(time.Hour))
	setData(map[string][]byte{"ca.crt": ca.certPEM, CertName: cert, KeyName: key})
	reconcileOnce()
	if served() != string(cert) {
		t.Fatal("the Secret's certificate was not written")
	}
	// Unchanged: not rewritten (the directory keeps its data directory).
	before, _ := os.Readlink(filepath.Join(opts.CertDir, dataLink))
	reconcileOnce()
	if after, _ := os.Readlink(filepath.Join(opts.CertDir, dataLink)); after != before {
		t.Error("an unchanged Secret was written again")
	}

	// Corrupted: the last good certificate stays.
	setData(map[string][]byte{"ca.crt": []byte("garbage"), CertName: []byte("garbage"), KeyName: key})
	reconcileOnce()
	if served() != string(cert) {
		t.Error("a corrupted Secret replaced the served certificate")
	}

	// Renewed: written.
	renewed, renewedKey, _ := ca.serving(t, opts.DNSName(), now.Add(-time.Minute), now.Add(2*time.Hour))
	setData(map[string][]byte{"ca.crt": ca.certPEM, CertName: renewed, KeyName: renewedKey})
	reconcileOnce()
	if served() != string(renewed) {
		t.Error("the renewed certificate was not written")
	}

	// Another Secret's request: ignored.
	if _, err := m.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "oria-system", Name: "other"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "oria-system", Name: "other"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("another Secret was created: %v", err)
	}
}

func TestEnsureSecret(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: "oria-system", Name: DefaultSecretName}
	existing := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Data: map[string][]byte{"ca.crt": []byte("kept")}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(existing).Build()
	if err := ensureSecret(context.Background(), c, c, key); err != nil {
		t.Fatal(err)
	}
	got := &corev1.Secret{}
	if err := c.Get(context.Background(), key, got); err != nil || string(got.Data["ca.crt"]) != "kept" {
		t.Errorf("an existing Secret was changed: %v %v", got.Data, err)
	}
	empty := fake.NewClientBuilder().WithScheme(scheme).Build()
	if err := ensureSecret(context.Background(), empty, empty, key); err != nil {
		t.Fatal(err)
	}
	if err := empty.Get(context.Background(), key, got); err != nil {
		t.Errorf("a missing Secret was not created: %v", err)
	}
}
