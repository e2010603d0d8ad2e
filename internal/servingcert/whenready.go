package servingcert

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// readyServer is a webhook server that starts only once ready is closed:
// controller-runtime's server reads its certificate when it starts and
// fails when there is none; this one waits for oria's. It is still a
// webhook.Server, so the manager runs it with its webhooks, on every
// replica.
type readyServer struct {
	webhook.Server
	ready <-chan struct{}
}

func (s *readyServer) Start(ctx context.Context) error {
	select {
	case <-s.ready:
	case <-ctx.Done():
		return nil
	}
	return s.Server.Start(ctx)
}
