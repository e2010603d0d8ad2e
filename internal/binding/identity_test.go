package binding

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestPinNamespaces(t *testing.T) {
	nss := []Namespace{{Name: "a", UID: "a1"}, {Name: "b", UID: "b2"}, {Name: "c", UID: "c1"}}
	tests := []struct {
		name          string
		listed        []string
		record        map[string]string
		fresh         bool
		wantPins      map[string]string
		wantRecreated []string
	}{
		{name: "nothing listed", record: map[string]string{"a": "a1"}},
		{name: "first sight records what exists", listed: []string{"a", "b", "missing"},
			wantPins: map[string]string{"a": "a1", "b": "b2"}},
		{name: "same namespaces", listed: []string{"a", "b"}, record: map[string]string{"a": "a1", "b": "b2"},
			wantPins: map[string]string{"a": "a1", "b": "b2"}},
		{name: "re-created namespace is not carried over", listed: []string{"a", "b"}, record: map[string]string{"a": "a1", "b": "b1"},
			wantPins: map[string]string{"a": "a1", "b": "b1"}, wantRecreated: []string{"b"}},
		{name: "a new spec records anew", listed: []string{"a", "b"}, record: map[string]string{"a": "a1", "b": "b1"}, fresh: true,
			wantPins: map[string]string{"a": "a1", "b": "b2"}},
		{name: "a deleted namespace keeps its record", listed: []string{"a", "gone"}, record: map[string]string{"a": "a1", "gone": "g1"},
			wantPins: map[string]string{"a": "a1", "gone": "g1"}},
		{name: "a listed namespace created later is recorded once", listed: []string{"c"}, record: map[string]string{},
			wantPins: map[string]string{"c": "c1"}},
		{name: "records of unlisted namespaces are dropped", listed: []string{"a"}, record: map[string]string{"a": "a1", "b": "b1"},
			wantPins: map[string]string{"a": "a1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pins, recreated := PinNamespaces(tc.listed, nss, tc.record, tc.fresh)
			if diff := cmp.Diff(tc.wantPins, pins, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("pins (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRecreated, recreated, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("recreated (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTargetsWithout(t *testing.T) {
	in := Targets{Namespaces: []string{"a", "b", "c"}, Terminating: []string{"d"}, Missing: []string{"e"}}
	got := in.Without([]string{"b", "d"})
	want := Targets{Namespaces: []string{"a", "c"}, Terminating: []string{}, Missing: []string{"e"}, Recreated: []string{"b", "d"}}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, in.Namespaces); diff != "" {
		t.Errorf("Without changed its receiver (-want +got):\n%s", diff)
	}
}
