package reconciler

import (
	"testing"

	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/operator-framework/oria/internal/engine"
)

// TestCheck: a controller missing a dependency is refused at start, with
// every missing one named; one with all of them is not.
func TestCheck(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	full := Base{Client: c, APIReader: c, Recorder: &events.FakeRecorder{}, Engine: engine.New(engine.Unobserved), Memo: engine.NewMemo()}
	for _, tc := range []struct {
		name string
		base Base
		more []Need
		want string
	}{
		{"all there", full, []Need{{"the index", true}}, ""},
		{"none", Base{}, nil, "X cannot start without a client, an API reader, an event recorder, the write engine, a memo"},
		{"one more missing", full, []Need{{"the index", false}, {"the gate", true}}, "X cannot start without the index"},
	} {
		err := Check("X", tc.base, tc.more...)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: Check = %q, want %q", tc.name, got, tc.want)
		}
	}
}
