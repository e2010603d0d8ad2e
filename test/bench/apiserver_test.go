package main

import (
	"strings"
	"testing"
)

// The conditions a phase starts in come from one scrape of the API
// server's metrics: watch counters and watch-cache capacities by resource
// (summed over groups), and the heap.
func TestParseServerState(t *testing.T) {
	text := `# HELP watch_cache_capacity [ALPHA] Total capacity of watch cache broken by resource type.
# TYPE watch_cache_capacity gauge
watch_cache_capacity{group="rbac.authorization.k8s.io",resource="rolebindings"} 131072
watch_cache_capacity{group="rbac.authorization.k8s.io",resource="clusterroles"} 800
watch_cache_capacity{group="",resource="namespaces"} 5000
apiserver_terminated_watchers_total{group="rbac.authorization.k8s.io",resource="rolebindings"} 3
apiserver_init_events_total{group="rbac.authorization.k8s.io",resource="rolebindings"} 40
apiserver_init_events_total{group="rbac.authorization.k8s.io",resource="clusterroles"} 7
go_memstats_heap_inuse_bytes 2.097152e+08
`
	st := parseServerState(text)
	if st == nil {
		t.Fatal("no state")
	}
	if got := st.watch["rolebindings"]; got != (watchHealth{terminated: 3, initEvents: 40}) {
		t.Errorf("rolebindings watch = %+v", got)
	}
	if got := st.watch["clusterroles"]; got != (watchHealth{initEvents: 7}) {
		t.Errorf("clusterroles watch = %+v", got)
	}
	want := "heap in use 200 MB, rolebindings watch cache 131072 events, clusterroles watch cache 800 events"
	if got := st.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}

	// Metrics without samples count as zero; text that does not parse
	// gives no state.
	if parseServerState("apiserver_init_events_total{resource=\"x\n") != nil {
		t.Error("state from unparsable text")
	}
	bare := parseServerState(strings.Join(strings.Split(text, "\n")[5:8], "\n"))
	if bare == nil || bare.heapInUse != 0 || bare.capacity["rolebindings"] != 0 || bare.watch["rolebindings"].terminated != 3 {
		t.Errorf("bare state = %+v", bare)
	}
	var none *serverState
	if none.String() != "unknown" {
		t.Errorf("nil state = %q", none.String())
	}
}
