package localcluster

import (
	"net"
	"sync"
)

// handedOut are the ports FreePorts returned in this process: it never
// returns one twice. The kernel may give a port back as soon as its
// listener is closed, so two calls made apart (a replica's webhook port,
// then its metrics, health and pprof ports) once returned the same one, and
// the replica failed to start ("address already in use").
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on now.
func FreePort() (int, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// FreePorts returns n distinct TCP ports on 127.0.0.1 that nothing listens
// on now and that no earlier call in this process returned: each is held
// until all are found.
func FreePorts(n int) ([]int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	ports := make([]int, 0, n)
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		port := l.Addr().(*net.TCPAddr).Port
		if handedOut.ports[port] {
			continue // held open until the end: the next Listen gets another
		}
		handedOut.ports[port] = true
		ports = append(ports, port)
	}
	return ports, nil
}
