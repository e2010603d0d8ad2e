package manager

import (
	"context"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// transportOf unwraps client-go's round trippers (user agent,
// authentication) down to the transport that owns the connections.
func transportOf(t *testing.T, hc *http.Client) *http.Transport {
	t.Helper()
	rt := hc.Transport
	for {
		switch v := rt.(type) {
		case nil: // client-go leaves it unset for http.DefaultTransport
			return http.DefaultTransport.(*http.Transport)
		case *http.Transport:
			return v
		case utilnet.RoundTripperWrapper:
			rt = v.WrappedRoundTripper()
		default:
			t.Fatalf("unexpected round tripper %T", rt)
		}
	}
}

func TestWatchesHaveTheirOwnConnection(t *testing.T) {
	for name, cfg := range map[string]*rest.Config{
		"TLS with a bearer token": {Host: "https://127.0.0.1:6443", BearerToken: "t", TLSClientConfig: rest.TLSClientConfig{Insecure: true}},
		"plain HTTP":              {Host: "http://127.0.0.1:8080"},
	} {
		t.Run(name, func(t *testing.T) {
			writes, err := rest.HTTPClientFor(cfg)
			require.NoError(t, err)
			again, err := rest.HTTPClientFor(rest.CopyConfig(cfg))
			require.NoError(t, err)
			// What this guards against: client-go shares one transport
			// (one HTTP/2 connection) between equal configs.
			require.Same(t, transportOf(t, writes), transportOf(t, again), "client-go shares transports between equal configs")

			watches, err := WatchHTTPClient(cfg)
			require.NoError(t, err)
			require.NotSame(t, transportOf(t, writes), transportOf(t, watches), "the cache's watches must not share oria's write connection")
			another, err := WatchHTTPClient(cfg)
			require.NoError(t, err)
			require.NotSame(t, transportOf(t, watches), transportOf(t, another))

			// Everything else is the caller's: host, credentials, limits.
			own := OwnConnection(cfg)
			require.Equal(t, cfg.Host, own.Host)
			require.Equal(t, cfg.BearerToken, own.BearerToken)
			require.Nil(t, cfg.Dial, "cfg is not changed")
		})
	}
}

func TestOwnConnectionKeepsTheCallersDialer(t *testing.T) {
	called := false
	cfg := &rest.Config{Host: "https://127.0.0.1:6443", Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		called = true
		return nil, &net.OpError{Op: "dial", Net: network, Err: net.ErrClosed}
	}}
	_, _ = OwnConnection(cfg).Dial(context.Background(), "tcp", "127.0.0.1:6443")
	require.True(t, called, "a dialer the caller set (a proxy, a tunnel) is still used")
}
