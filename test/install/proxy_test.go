package install

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// proxy stands for the webhook's Service: it accepts the API server's
// connections on the address the local control plane calls and forwards
// each to a replica, in turn, skipping one that refuses the connection (as
// the Service's endpoints drop a pod that is gone).
type proxy struct {
	l        net.Listener
	backends []string
	next     atomic.Uint64
	skipped  atomic.Int64
	wg       sync.WaitGroup
}

func startProxy(t *testing.T, addr string, backends ...string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err, "listening where the API server calls the guard")
	p := &proxy{l: l, backends: backends}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { _ = l.Close(); p.wg.Wait() })
	return p
}

// failovers is how many times a connection went past a replica that was
// down.
func (p *proxy) failovers() int { return int(p.skipped.Load()) }

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		go p.forward(in)
	}
}

func (p *proxy) forward(in net.Conn) {
	defer in.Close()
	first := p.next.Add(1)
	for i := range len(p.backends) {
		addr := p.backends[(int(first)+i)%len(p.backends)]
		out, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			p.skipped.Add(1)
			continue
		}
		defer out.Close()
		done := make(chan struct{}, 2)
		go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
		go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
		<-done // either side closed: close both
		return
	}
}
