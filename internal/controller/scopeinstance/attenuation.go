package scopeinstance

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
)

// Impersonators hands out clients that act as a ServiceAccount, one per
// ServiceAccount for the life of the process (a client holds connections).
// The API server decides what such a client may write: oria's own rights
// do not apply, only the ServiceAccount's (oria needs only the right to
// impersonate it).
type Impersonators struct {
	// Config is oria's own configuration; Scheme and Mapper those of its
	// clients.
	Config  *rest.Config
	Options client.Options

	mu      sync.Mutex
	clients map[string]client.Client
}

// For returns a client acting as the ServiceAccount sa.
func (m *Impersonators) For(sa oriav1alpha1.ServiceAccountReference) (client.Client, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	user := sa.Username()
	if c, ok := m.clients[user]; ok {
		return c, nil
	}
	cfg := rest.CopyConfig(m.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, m.Options)
	if err != nil {
		return nil, fmt.Errorf("creating a client impersonating %s: %w", user, err)
	}
	if m.clients == nil {
		m.clients = map[string]client.Client{}
	}
	m.clients[user] = c
	return c, nil
}

// checkServiceAccount returns a SpecError (ServiceAccountNotFound) when the
// instance names a ServiceAccount that does not exist: nothing new is
// written for it then (existing bindings are kept), and the instance looks
// again later. One metadata-only read, for attenuated instances only.
func (r *Reconciler) checkServiceAccount(ctx context.Context, si *oriav1alpha1.ScopeInstance) (*binding.SpecError, error) {
	sa := si.Spec.ServiceAccount
	if sa == nil {
		return nil, nil
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ServiceAccount"))
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: sa.Namespace, Name: sa.Name}, m)
	switch {
	case apierrors.IsNotFound(err):
		return &binding.SpecError{Reason: oriav1alpha1.ReasonServiceAccountNotFound, Message: fmt.Sprintf(
			"ServiceAccount %q in namespace %q (spec.serviceAccount) does not exist; nothing new is bound until it does, existing bindings are kept",
			sa.Name, sa.Namespace)}, nil
	case err != nil:
		return nil, fmt.Errorf("reading ServiceAccount %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	return nil, nil
}

// writerFor returns the writer of si's bindings: oria's own, or, for an
// instance with a serviceAccount, one that grants as that ServiceAccount
// (and revokes as oria: taking access away needs no ceiling).
func (r *Reconciler) writerFor(si *oriav1alpha1.ScopeInstance) (*engine.Writer, error) {
	w := r.writer()
	if sa := si.Spec.ServiceAccount; sa != nil {
		if r.Impersonators == nil {
			return nil, fmt.Errorf("spec.serviceAccount is set but this controller cannot impersonate")
		}
		c, err := r.Impersonators.For(*sa)
		if err != nil {
			return nil, err
		}
		w.Client, w.Revoker, w.Attenuated = c, r.Client, true
	}
	return w, nil
}
