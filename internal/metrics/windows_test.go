package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/manager"
)

var t0 = time.Date(2025, 6, 6, 12, 0, 0, 0, time.UTC)

func windowed(name string, notBefore, expiresAt time.Duration, set ...bool) oriav1alpha1.ScopeInstance {
	si := oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: "t"}}
	if len(set) > 0 && set[0] {
		si.Spec.NotBefore = &metav1.Time{Time: t0.Add(notBefore)}
	}
	if len(set) > 1 && set[1] {
		si.Spec.ExpiresAt = &metav1.Time{Time: t0.Add(expiresAt)}
	}
	return si
}

func TestWindows(t *testing.T) {
	d := func(v time.Duration) *time.Duration { return &v }
	for _, tc := range []struct {
		name      string
		instances []oriav1alpha1.ScopeInstance
		want      WindowState
	}{
		{"none", nil, WindowState{Grants: map[string]int{"pending": 0, "active": 0, "expired": 0}}},
		{"instances without a window are not time-bound", []oriav1alpha1.ScopeInstance{windowed("plain", 0, 0)},
			WindowState{Grants: map[string]int{"pending": 0, "active": 0, "expired": 0}}},
		{"one of each; the soonest end of the active ones", []oriav1alpha1.ScopeInstance{
			windowed("pending", time.Hour, 2*time.Hour, true, true),
			windowed("active-far", 0, 3*time.Hour, false, true),
			windowed("active-soon", -time.Hour, 10*time.Minute, true, true),
			windowed("active-no-end", -time.Hour, 0, true),
			windowed("expired", 0, -time.Second, false, true),
		}, WindowState{Grants: map[string]int{"pending": 1, "active": 3, "expired": 1}, NextExpiry: d(10 * time.Minute)}},
		{"active without an end: no next expiry", []oriav1alpha1.ScopeInstance{windowed("open", -time.Hour, 0, true)},
			WindowState{Grants: map[string]int{"pending": 0, "active": 1, "expired": 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Windows(tc.instances, t0)); diff != "" {
				t.Errorf("Windows (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWindowCollector(t *testing.T) {
	scheme, err := manager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	var objs []client.Object
	for _, si := range []oriav1alpha1.ScopeInstance{
		windowed("a", 0, 90*time.Second, false, true), windowed("b", time.Hour, 0, true), windowed("c", 0, -time.Hour, false, true),
	} {
		objs = append(objs, si.DeepCopy())
	}
	c := NewWindowCollector(fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build(), func() time.Time { return t0 })
	want := `
# HELP oria_time_bound_grants Time-bound grants (ScopeInstances with spec.notBefore or spec.expiresAt; an RBACPolicy counts as the instance it compiles to) by state: pending, active, expired.
# TYPE oria_time_bound_grants gauge
oria_time_bound_grants{state="active"} 1
oria_time_bound_grants{state="expired"} 1
oria_time_bound_grants{state="pending"} 1
# HELP oria_time_bound_next_expiry_seconds Seconds until the soonest spec.expiresAt of an active time-bound grant; absent when no active grant has one.
# TYPE oria_time_bound_next_expiry_seconds gauge
oria_time_bound_next_expiry_seconds 90
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), TimeBoundGrants, NextExpirySeconds); err != nil {
		t.Error(err)
	}
}
