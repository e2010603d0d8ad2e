package manager

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
)

// OwnConnection returns a copy of cfg whose clients open their own
// connection to the API server instead of sharing the process's.
//
// client-go keeps one transport, and so one HTTP/2 connection, per API
// server and TLS identity, shared by every client built from an equal
// config. oria's writes (up to 128 in flight) and its cache's watches would
// then travel on one TCP connection, and while it is busy with responses
// the watch streams fall behind. The API server's watch cache holds only a
// few events (about ten) for each watcher and closes a watcher that stays
// behind as unresponsive; the reflector then watches again and the server
// replays what was missed, at a cost to both. On a connection of its own
// the watches keep up (docs/benchmarks.md, History, 9a9b99a).
//
// The copy gets a dial function of its own (client-go's default dialer, or
// cfg's): client-go's transport cache tells transports apart by the dial
// function's holder, which rest.Config makes anew for each client, so every
// HTTP client built from the copy (rest.HTTPClientFor) has a new transport.
// Build one and reuse it.
func OwnConnection(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	dial := cfg.Dial
	if dial == nil {
		// client-go's own default dialer.
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	out.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		return dial(ctx, network, address)
	}
	return out
}

// WatchHTTPClient returns the HTTP client oria's cache lists and watches
// with: on a connection of its own (OwnConnection), so that oria's writes do
// not hold up its watches.
func WatchHTTPClient(cfg *rest.Config) (*http.Client, error) {
	hc, err := rest.HTTPClientFor(OwnConnection(cfg))
	if err != nil {
		return nil, fmt.Errorf("creating the cache's HTTP client: %w", err)
	}
	return hc, nil
}
