// Package impersonate hands out clients that act as a ServiceAccount, for
// the writes of a ServiceAccount ceiling (spec.serviceAccount): the API
// server then decides what such a client may write, with the
// ServiceAccount's rights, not oria's (oria needs only the right to
// impersonate it).
package impersonate

import (
	"errors"
	"fmt"
	"sync"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/subjects"
)

// Clients hands out one client per ServiceAccount for the life of the
// process (a client holds connections); safe for concurrent use. Make one
// per manager with New.
type Clients struct {
	config  *rest.Config
	options client.Options

	mu      sync.Mutex
	clients map[string]client.Client
}

// New returns the clients made from oria's own configuration cfg, with the
// scheme and mapper of opts.
func New(cfg *rest.Config, opts client.Options) (*Clients, error) {
	if cfg == nil || opts.Scheme == nil {
		return nil, errors.New("impersonate.New: a REST configuration and a scheme are required")
	}
	return &Clients{config: cfg, options: opts, clients: map[string]client.Client{}}, nil
}

// For returns a client acting as the ServiceAccount name in namespace.
func (m *Clients) For(namespace, name string) (client.Client, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	user := subjects.ServiceAccountUser(namespace, name)
	if c, ok := m.clients[user]; ok {
		return c, nil
	}
	cfg := rest.CopyConfig(m.config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, m.options)
	if err != nil {
		return nil, fmt.Errorf("creating a client impersonating %s: %w", user, err)
	}
	m.clients[user] = c
	return c, nil
}
