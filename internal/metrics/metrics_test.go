package metrics

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/manager"
)

func ready(status metav1.ConditionStatus, reason string) []metav1.Condition {
	return []metav1.Condition{{Type: oriav1alpha1.TypeReady, Status: status, Reason: reason}}
}

func managed() map[string]string {
	return map[string]string{oriav1alpha1.LabelManaged: oriav1alpha1.ManagedValue}
}

func fakeReader(t *testing.T) client.Reader {
	t.Helper()
	scheme, err := manager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	objs := []client.Object{
		&oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p1"}, Status: oriav1alpha1.RBACPolicyStatus{Conditions: ready(metav1.ConditionTrue, oriav1alpha1.ReasonBound)}},
		&oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p2"}, Status: oriav1alpha1.RBACPolicyStatus{Conditions: ready(metav1.ConditionFalse, oriav1alpha1.ReasonConflict)}},
		&oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p3"}},
		&oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "i1"}, Status: oriav1alpha1.ScopeInstanceStatus{Conditions: ready(metav1.ConditionFalse, oriav1alpha1.ReasonNamespaceNotFound)}},
		&ocv1.ClusterExtension{ObjectMeta: metav1.ObjectMeta{Name: "e1"}, Status: ocv1.ClusterExtensionStatus{Conditions: []metav1.Condition{
			{Type: "Installed", Status: metav1.ConditionTrue, Reason: "Succeeded"},
			{Type: oriav1alpha1.TypeRBACManaged, Status: metav1.ConditionTrue, Reason: oriav1alpha1.ReasonLegacy},
		}}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "oria-role", Labels: managed()}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "rb", Namespace: "a", Labels: managed()}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "rb", Namespace: "b", Labels: managed()}},
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&oriav1alpha1.RBACPolicy{}, &oriav1alpha1.ScopeInstance{}, &ocv1.ClusterExtension{}).Build()
}

func TestSnapshot(t *testing.T) {
	got, errs := Snapshot(context.Background(), fakeReader(t))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := State{
		Managed: map[string]int{"RBACPolicy": 3, "ScopeTemplate": 0, "ScopeInstance": 1, "ClusterRole": 1, "ClusterRoleBinding": 0, "RoleBinding": 2},
		ByReason: map[ReasonKey]int{
			{"RBACPolicy", "True", "Bound"}:                 1,
			{"RBACPolicy", "False", "Conflict"}:             1,
			{"RBACPolicy", "Unknown", ReasonNotReported}:    1,
			{"ScopeInstance", "False", "NamespaceNotFound"}: 1,
			{"ClusterExtension", "True", "Legacy"}:          1,
		},
		Conflicts: map[string]int{"RBACPolicy": 1, "ScopeTemplate": 0, "ScopeInstance": 0, "ClusterExtension": 0},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Snapshot (-want +got):\n%s", d)
	}
}

// Without OLM v1 the API server does not serve ClusterExtensions: the kind
// is left out of the snapshot, quietly (no error, so no log at every
// scrape); oria_olm_api_available says why.
func TestSnapshotWithoutOLM(t *testing.T) {
	scheme, err := manager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	r := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*ocv1.ClusterExtensionList); ok {
				return &meta.NoKindMatchError{GroupKind: ocv1.GroupVersion.WithKind(ocv1.ClusterExtensionKind).GroupKind(), SearchedVersions: []string{"v1"}}
			}
			return c.List(ctx, list, opts...)
		},
	}).Build()
	got, errs := Snapshot(context.Background(), r)
	if len(errs) > 0 {
		t.Fatalf("Snapshot errors: %v", errs)
	}
	want := map[string]int{"RBACPolicy": 0, "ScopeTemplate": 0, "ScopeInstance": 0}
	if d := cmp.Diff(want, got.Conflicts); d != "" {
		t.Errorf("Conflicts (-want +got):\n%s", d)
	}
}

func TestOLMAPIAvailable(t *testing.T) {
	for _, available := range []bool{false, true, false} {
		SetOLMAPIAvailable(available)
		want := 0.0
		if available {
			want = 1
		}
		if got := testutil.ToFloat64(olmAPIAvailable); got != want {
			t.Errorf("after SetOLMAPIAvailable(%v): %s = %v, want %v", available, OLMAPIAvailable, got, want)
		}
	}
}

func TestCollector(t *testing.T) {
	c := NewCollector(fakeReader(t))
	want := `
# HELP oria_conflicts Objects of each oria kind (and ClusterExtensions) whose condition reason is Conflict: a name oria would use is held by an object oria did not create.
# TYPE oria_conflicts gauge
oria_conflicts{kind="ClusterExtension"} 0
oria_conflicts{kind="RBACPolicy"} 1
oria_conflicts{kind="ScopeInstance"} 0
oria_conflicts{kind="ScopeTemplate"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), Conflicts); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c, ObjectsByReadyReason); n != 5 {
		t.Errorf("%s has %d series, want 5", ObjectsByReadyReason, n)
	}
	if n := testutil.CollectAndCount(c, ManagedObjects); n != 6 {
		t.Errorf("%s has %d series, want 6", ManagedObjects, n)
	}
}

func TestObserveWrites(t *testing.T) {
	before := testutil.ToFloat64(writes.WithLabelValues("RoleBinding", "created"))
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"}, "x", errors.New("no"))
	beforeErr := testutil.ToFloat64(writeErrors.WithLabelValues("RoleBinding", "Forbidden"))
	beforeUnknown := testutil.ToFloat64(writeErrors.WithLabelValues("RoleBinding", "Unknown"))
	ObserveWrites("RoleBinding", []engine.Outcome{
		{Action: engine.Created}, {Action: engine.Created}, {Action: engine.Unchanged},
		{Action: engine.Conflict}, {Action: engine.Failed, Err: forbidden}, {Action: engine.Forbidden, Err: fmt.Errorf("creating: %w", forbidden)},
		{Action: engine.Failed, Err: errors.New("dial")}, {Action: engine.Skipped},
		{Action: engine.Failed, Err: fmt.Errorf("updating: %w", apierrors.NewConflict(schema.GroupResource{Resource: "scopetemplates"}, "x", errors.New("modified")))},
	})
	if d := testutil.ToFloat64(writes.WithLabelValues("RoleBinding", "created")) - before; d != 2 {
		t.Errorf("created writes grew by %v, want 2", d)
	}
	// The refusal of a ceiling's ServiceAccount (engine.Forbidden) is a
	// standing state, not counted at every recheck; oria's own refused write
	// is.
	if d := testutil.ToFloat64(writeErrors.WithLabelValues("RoleBinding", "Forbidden")) - beforeErr; d != 1 {
		t.Errorf("Forbidden write errors grew by %v, want 1", d)
	}
	if d := testutil.ToFloat64(writeErrors.WithLabelValues("RoleBinding", "Unknown")) - beforeUnknown; d != 1 {
		t.Errorf("Unknown write errors grew by %v, want 1", d)
	}
	// A lost optimistic-concurrency race is retried at once, not refused.
	if d := testutil.ToFloat64(writeErrors.WithLabelValues("RoleBinding", "Conflict")); d != 0 {
		t.Errorf("Conflict write errors = %v, want 0", d)
	}
}

func TestNamespaceLatency(t *testing.T) {
	now := time.Unix(1000, 0)
	var got []float64
	l := NewNamespaceLatency(func(s float64) { got = append(got, s) })
	l.Now = func() time.Time { return now }

	l.Seen("si", "new")
	l.Seen("si", "exists")
	l.Seen("si", "gone")
	l.Seen("other", "new")
	now = now.Add(300 * time.Millisecond)
	l.Seen("si", "new") // a second event: the clock runs from the first
	now = now.Add(200 * time.Millisecond)
	l.Forget("gone")
	written := now
	now = now.Add(time.Second) // measured to the write, not to the call
	l.Bound("si", []engine.Outcome{
		{Namespace: "new", Action: engine.Created},
		{Namespace: "new", Action: engine.Created}, // a second role in the same namespace
		{Namespace: "exists", Action: engine.Unchanged},
		{Namespace: "unrelated", Action: engine.Created},
	}, written)
	if d := cmp.Diff([]float64{0.5}, got); d != "" {
		t.Errorf("observed (-want +got):\n%s", d)
	}
	if n := l.Pending(); n != 1 { // other/new
		t.Errorf("pending = %d, want 1", n)
	}
}

func TestRegisterOnce(t *testing.T) {
	r := fakeReader(t)
	if err := Register(r); err != nil {
		t.Fatal(err)
	}
	if err := Register(r); err != nil {
		t.Fatalf("second Register: %v", err)
	}
	var _ prometheus.Collector = NewCollector(r)
}

// TestNamespaceLatencyAbandon: an instance that cannot bind for the world's
// reason (a missing ServiceAccount) ends its waits unmeasured; a binding
// created later measures nothing.
func TestNamespaceLatencyAbandon(t *testing.T) {
	now := time.Unix(1000, 0)
	var got []float64
	l := NewNamespaceLatency(func(s float64) { got = append(got, s) })
	l.Now = func() time.Time { return now }
	l.Seen("waiting", "a")
	l.Seen("other", "a")
	l.Abandon("waiting")
	now = now.Add(time.Minute)
	l.Bound("waiting", []engine.Outcome{{Namespace: "a", Action: engine.Created}}, l.Now())
	l.Bound("other", []engine.Outcome{{Namespace: "a", Action: engine.Created}}, l.Now())
	if len(got) != 1 || got[0] != 60 {
		t.Errorf("observed %v, want only the other instance's 60 s", got)
	}
	if l.Pending() != 0 {
		t.Errorf("%d pending", l.Pending())
	}
}
