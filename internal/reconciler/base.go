package reconciler

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/engine"
)

// Base is what every controller that writes is built from, each part
// required (a controller's New refuses it otherwise, Check): its clients,
// its Events, and its part of the write engine. controller.SetupAll makes
// one per controller; the controllers' Deps embed it.
type Base struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server: what the cache does not hold
	// (objects without oria's labels, one just created).
	APIReader client.Reader
	// Recorder emits the controller's Events (LimitEvents).
	Recorder events.EventRecorder
	// Engine is the write engine's state the controllers of one manager
	// share.
	Engine *engine.Engine
	// Memo is the controller's memory of conflicts and creates
	// (engine.NewMemo), for the life of the process; a test shares it with
	// the Reconcilers it builds.
	Memo *engine.Memo
}

// Writer returns the engine's writer of one reconcile, writing as oria,
// trusting a remembered conflict for recheck, with at most workers writes
// in flight (engine.DefaultWorkers when 0).
func (b Base) Writer(recheck time.Duration, workers int) *engine.Writer {
	return &engine.Writer{Client: b.Client, Revoker: b.Client, Reader: b.APIReader, Cache: b.Client, Memo: b.Memo, Engine: b.Engine,
		Recheck: recheck, Workers: workers}
}

// Need is one more dependency of a controller: its name, for the error,
// and whether it is set.
type Need struct {
	Name string
	Set  bool
}

// Check returns an error naming every dependency of the controller what
// that is missing: the parts of b, and more.
func Check(what string, b Base, more ...Need) error {
	needs := append([]Need{{"a client", b.Client != nil}, {"an API reader", b.APIReader != nil}, {"an event recorder", b.Recorder != nil},
		{"the write engine", b.Engine != nil}, {"a memo", b.Memo != nil}}, more...)
	var missing []string
	for _, n := range needs {
		if !n.Set {
			missing = append(missing, n.Name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%s cannot start without %s", what, strings.Join(missing, ", "))
}
