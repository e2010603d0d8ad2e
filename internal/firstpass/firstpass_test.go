package firstpass

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/scheme"
)

// step is one event of a first pass: a reconcile of an object of kind
// (observe), or the list of kind's objects (list).
type step struct {
	observe string // a kind
	list    string // a kind
	names   []string
}

func keys(names ...string) []types.NamespacedName {
	out := make([]types.NamespacedName, len(names))
	for i, n := range names {
		out[i] = types.NamespacedName{Name: n}
	}
	return out
}

func objectOf(kind string) client.Object {
	for _, k := range Kinds() {
		if k.Name == kind {
			return k.Object.DeepCopyObject().(client.Object)
		}
	}
	return &oriav1alpha1.ScopeInstance{} // not reached
}

// capture collects the messages a Tracker logs.
func capture(msgs *[]string) logr.Logger {
	return funcr.New(func(_, args string) { *msgs = append(*msgs, args) }, funcr.Options{})
}

// TestTracker: a kind's pass ends when every object listed has been
// reconciled once since start, counting reconciles before the list; an
// empty kind ends at its list; reconciles of other kinds do not count.
func TestTracker(t *testing.T) {
	const si, st = "ScopeInstance", "ScopeTemplate"
	for _, tc := range []struct {
		name  string
		steps []step
		// done is, after each step, whether si's pass is done.
		done []bool
	}{
		{"reconciled after the list", []step{{list: si, names: []string{"a", "b"}}, {observe: si, names: []string{"a"}}, {observe: si, names: []string{"b"}}},
			[]bool{false, false, true}},
		{"reconciled before the list", []step{{observe: si, names: []string{"a", "b"}}, {list: si, names: []string{"a", "b"}}},
			[]bool{false, true}},
		{"one before, one after", []step{{observe: si, names: []string{"b"}}, {list: si, names: []string{"a", "b"}}, {observe: si, names: []string{"b"}}, {observe: si, names: []string{"a"}}},
			[]bool{false, false, false, true}},
		{"nothing to reconcile", []step{{list: si}}, []bool{true}},
		{"an object created after the list is not waited for", []step{{list: si, names: []string{"a"}}, {observe: si, names: []string{"new"}}, {observe: si, names: []string{"a"}}},
			[]bool{false, false, true}},
		{"another kind's reconciles do not count", []step{{list: si, names: []string{"a"}}, {observe: st, names: []string{"a"}}},
			[]bool{false, false}},
		{"a second list changes nothing", []step{{list: si, names: []string{"a"}}, {list: si}}, []bool{false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(logr.Discard(), Kinds()...)
			tr.Begin()
			var got []bool
			for _, s := range tc.steps {
				if s.list != "" {
					tr.Listed(s.list, keys(s.names...))
				}
				for _, k := range keys(s.names...) {
					if s.observe != "" {
						tr.Observe(objectOf(s.observe), k)
					}
				}
				got = append(got, tr.Done(si))
			}
			if diff := cmp.Diff(tc.done, got); diff != "" {
				t.Errorf("done after each step (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTrackerSaysIt: the gauges go from 0 to 1 with the seconds since
// Begin, a log line per kind, and one more when every kind is done.
func TestTrackerSaysIt(t *testing.T) {
	var msgs []string
	tr := New(capture(&msgs), Kinds()...)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr.now = func() time.Time { return now }
	tr.Begin()
	if v := testutil.ToFloat64(doneGauge.WithLabelValues("ScopeInstance")); v != 0 {
		t.Errorf("%s{kind=ScopeInstance} = %v before the pass, want 0", DoneMetric, v)
	}
	now = now.Add(3 * time.Second)
	for _, k := range Kinds() {
		if k.Name != "ScopeInstance" {
			tr.Listed(k.Name, nil)
		}
	}
	tr.Listed("ScopeInstance", keys("a"))
	now = now.Add(4 * time.Second)
	tr.Observe(&oriav1alpha1.ScopeInstance{}, types.NamespacedName{Name: "a"})
	tr.Observe(&oriav1alpha1.ScopeInstance{}, types.NamespacedName{Name: "a"}) // done: nothing more said
	if v := testutil.ToFloat64(doneGauge.WithLabelValues("ScopeInstance")); v != 1 {
		t.Errorf("%s{kind=ScopeInstance} = %v, want 1", DoneMetric, v)
	}
	if v := testutil.ToFloat64(secondsGauge.WithLabelValues("ScopeInstance")); v != 7 {
		t.Errorf("%s{kind=ScopeInstance} = %v, want 7", SecondsMetric, v)
	}
	if v := testutil.ToFloat64(secondsGauge.WithLabelValues("RBACPolicy")); v != 3 {
		t.Errorf("%s{kind=RBACPolicy} = %v, want 3", SecondsMetric, v)
	}
	want := []string{
		`"level"=0 "msg"="first full pass done" "kind"="ClusterExtension" "objects"=0 "seconds"=3`,
		`"level"=0 "msg"="first full pass done" "kind"="RBACPolicy" "objects"=0 "seconds"=3`,
		`"level"=0 "msg"="first full pass done" "kind"="ScopeTemplate" "objects"=0 "seconds"=3`,
		`"level"=0 "msg"="first full pass done" "kind"="ScopeInstance" "objects"=1 "seconds"=7`,
		`"level"=0 "msg"="first full pass done for every kind" "seconds"=7`,
	}
	if diff := cmp.Diff(want, msgs); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}

// TestObserveThroughContext: reconciles report to the Tracker their
// context carries (the manager's BaseContext), and to none without one.
func TestObserveThroughContext(t *testing.T) {
	tr := New(logr.Discard(), Kinds()...)
	tr.Begin()
	tr.Listed("ScopeTemplate", keys("a"))
	Observe(context.Background(), &oriav1alpha1.ScopeTemplate{}, types.NamespacedName{Name: "a"})
	if tr.Done("ScopeTemplate") {
		t.Fatal("a reconcile without the Tracker in its context counted")
	}
	Observe(tr.Context(), &oriav1alpha1.ScopeTemplate{}, types.NamespacedName{Name: "a"})
	if !tr.Done("ScopeTemplate") {
		t.Error("a reconcile with the Tracker in its context did not count")
	}
}

// TestRunnable: once started, the runnable lists every kind from the
// cache; a kind the API server does not serve (OLM v1 not installed) is
// done at once, and a failed list is retried.
func TestRunnable(t *testing.T) {
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	failures := 1
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		&oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "i1"}},
		&oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p1"}},
	).WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		switch list.(type) {
		case *ocv1.ClusterExtensionList:
			return &meta.NoKindMatchError{GroupKind: ocv1.GroupVersion.WithKind(ocv1.ClusterExtensionKind).GroupKind(), SearchedVersions: []string{"v1"}}
		case *oriav1alpha1.RBACPolicyList:
			if failures > 0 {
				failures--
				return context.DeadlineExceeded
			}
		}
		return c.List(ctx, list, opts...)
	}}).Build()
	tr := New(logr.Discard(), Kinds()...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan error)
	go func() { stopped <- (&runnable{t: tr, reader: c}).Start(ctx) }()
	listed := func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		for _, p := range tr.order {
			if !p.listed {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(10 * time.Second); !listed() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if failures != 0 {
		t.Error("the failing list was not the one retried")
	}
	got := map[string]bool{}
	for _, k := range Kinds() {
		got[k.Name] = tr.Done(k.Name)
	}
	want := map[string]bool{"ClusterExtension": true, "RBACPolicy": false, "ScopeTemplate": true, "ScopeInstance": false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("done after the lists (-want +got):\n%s", diff)
	}
	tr.Observe(&oriav1alpha1.ScopeInstance{}, types.NamespacedName{Name: "i1"})
	tr.Observe(&oriav1alpha1.RBACPolicy{}, types.NamespacedName{Name: "p1"})
	if !tr.Done("ScopeInstance") || !tr.Done("RBACPolicy") {
		t.Error("the pass did not end once every listed object was reconciled")
	}
	cancel()
	if err := <-stopped; err != nil {
		t.Errorf("Start = %v", err)
	}
}
