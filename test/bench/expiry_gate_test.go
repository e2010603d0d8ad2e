package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
)

// TestSettledAt: since when a gate has been in the wanted states; an
// emptied gate then deleted has been closed since it was emptied.
func TestSettledAt(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	history := []gateChange{{at(0), gateEmpty}, {at(1), gateFilled}, {at(2), gateEmpty}, {at(3), gateAbsent}}
	for _, tc := range []struct {
		name    string
		changes []gateChange
		want    []gateState
		at      time.Time
		ok      bool
	}{
		{"nothing seen", nil, []gateState{gateFilled}, time.Time{}, false},
		{"empty since created", history[:1], []gateState{gateEmpty}, at(0), true},
		{"filled since notBefore", history[:2], []gateState{gateFilled}, at(1), true},
		{"not filled yet", history[:1], []gateState{gateFilled}, time.Time{}, false},
		{"emptied", history[:3], []gateState{gateEmpty, gateAbsent}, at(2), true},
		{"emptied then deleted", history, []gateState{gateEmpty, gateAbsent}, at(2), true},
		{"deleted", history, []gateState{gateAbsent}, at(3), true},
		{"filled, no longer", history, []gateState{gateFilled}, time.Time{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := settledAt(tc.changes, tc.want...)
			if !got.Equal(tc.at) || ok != tc.ok {
				t.Errorf("settledAt = %v, %t; want %v, %t", got, ok, tc.at, tc.ok)
			}
		})
	}
}

// TestGateWatchNote: a repeated state is not a change.
func TestGateWatchNote(t *testing.T) {
	g := &gateWatch{changed: make(chan struct{})}
	for _, s := range []gateState{gateEmpty, gateEmpty, gateFilled, gateFilled, gateAbsent} {
		g.note(s)
	}
	var got []gateState
	for _, c := range g.changes {
		got = append(got, c.state)
	}
	if d := cmp.Diff([]gateState{gateEmpty, gateFilled, gateAbsent}, got); d != "" {
		t.Errorf("changes (-want +got):\n%s", d)
	}
	if g.state() != gateAbsent {
		t.Errorf("state = %s, want absent", g.state())
	}
}

// TestAccessSample: spread over the namespaces no small grant binds, the
// first and the last included.
func TestAccessSample(t *testing.T) {
	ns := make([]string, 10)
	for i := range ns {
		ns[i] = fmt.Sprint(i)
	}
	for _, tc := range []struct {
		from, n int
		want    []string
	}{
		{0, 4, []string{"0", "3", "6", "9"}},
		{4, 3, []string{"4", "6", "9"}},
		{7, 5, []string{"7", "8", "9"}},
		{2, 1, []string{"2"}},
		{10, 5, []string{}},
		{20, 5, []string{}},
	} {
		if d := cmp.Diff(tc.want, accessSample(ns, tc.from, tc.n)); d != "" {
			t.Errorf("accessSample(from %d, n %d) (-want +got):\n%s", tc.from, tc.n, d)
		}
	}
}

// TestBoundTo: n RoleBindings, every one to the role.
func TestBoundTo(t *testing.T) {
	rb := func(ns, role string) rbacv1.RoleBinding {
		return rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: role}}
	}
	for _, tc := range []struct {
		name string
		rbs  []rbacv1.RoleBinding
		n    int
		want string
	}{
		{"all to the gate", []rbacv1.RoleBinding{rb("a", "gate"), rb("b", "gate")}, 2, ""},
		{"one to the template's role", []rbacv1.RoleBinding{rb("a", "gate"), rb("b", "reader")}, 2, "RoleBinding b/b binds ClusterRole reader, not ClusterRole gate"},
		{"one missing", []rbacv1.RoleBinding{rb("a", "gate")}, 2, "1 RoleBindings to ClusterRole gate, want 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if err := boundTo(tc.rbs, "ClusterRole", "gate", tc.n); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("boundTo = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestStateOf: a gate holding its seal alone is empty (every gate holds
// it), one with the sources' rules filled, as the watch sees them
// (unstructured).
func TestStateOf(t *testing.T) {
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "si", UID: "uid"}}
	sources := []binding.GateSource{{Name: "view", Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}}
	for _, c := range []struct {
		name string
		open bool
		want gateState
	}{{"before notBefore: the seal alone", false, gateEmpty}, {"open: the sources' rules", true, gateFilled}} {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(binding.GateRole(si, sources, c.open))
		if err != nil {
			t.Fatal(err)
		}
		if got := stateOf(&unstructured.Unstructured{Object: u}); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	if got := stateOf("not an object"); got != gateAbsent {
		t.Errorf("not an object: %s, want absent", got)
	}
}
