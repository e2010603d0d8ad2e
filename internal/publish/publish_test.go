package publish

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

func TestNamespacesAndValue(t *testing.T) {
	ref := oriav1alpha1.ConfigMapKeyReference{Namespace: "op", Name: "scope"}
	for _, tc := range []struct {
		name  string
		pub   oriav1alpha1.Publication
		bound []string
		want  string
	}{
		{"the ConfigMap's namespace by default", oriav1alpha1.Publication{ConfigMap: ref}, []string{"cp4i", "default"}, "cp4i,default,op"},
		{"sorted, no duplicates", oriav1alpha1.Publication{ConfigMap: ref}, []string{"z", "op", "a"}, "a,op,z"},
		{"nothing bound: the operator's namespace only", oriav1alpha1.Publication{ConfigMap: ref}, nil, "op"},
		{"excluded", oriav1alpha1.Publication{ConfigMap: ref, IncludeConfigMapNamespace: ptr.To(false)}, []string{"b", "a"}, "a,b"},
		{"excluded, nothing bound", oriav1alpha1.Publication{ConfigMap: ref, IncludeConfigMapNamespace: ptr.To(false)}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Value(Namespaces(tc.pub, tc.bound))); diff != "" {
				t.Errorf("value (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigMapApply(t *testing.T) {
	ref := oriav1alpha1.ConfigMapKeyReference{Namespace: "op", Name: "scope"}
	ac := ConfigMap("inst", ref, "a,b", "")
	if ac.UID != nil {
		t.Errorf("a ConfigMap not read names UID %q", *ac.UID)
	}
	if read := ConfigMap("inst", ref, "a,b", "u-1"); read.UID == nil || *read.UID != "u-1" {
		t.Error("a ConfigMap read is applied without its UID: an apply would create it again once deleted")
	}
	if w := Withdrawal("op", "scope", "u-1"); w.UID == nil || *w.UID != "u-1" || w.Data != nil || w.Annotations != nil || w.Labels != nil {
		t.Errorf("a withdrawal names the UID read and no field: %+v", w)
	}
	if diff := cmp.Diff(map[string]string{"namespaces": "a,b"}, ac.Data); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"publication.oria.operatorframework.io/inst": "namespaces"}, ac.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	cm := &metav1.ObjectMeta{Labels: ac.Labels, Annotations: ac.Annotations}
	if !Current(cm, ac.Data, "inst", ref, "a,b") {
		t.Error("what was applied is not current")
	}
	if Current(cm, ac.Data, "inst", ref, "a,b,c") || Current(cm, ac.Data, "other", ref, "a,b") {
		t.Error("a different value or instance is current")
	}
	if got := FieldOwner("inst"); got != "oria-publication/inst" {
		t.Errorf("field owner %q", got)
	}
}

func TestDisposable(t *testing.T) {
	pubOwner := metav1.ManagedFieldsEntry{Manager: "oria-publication/x"}
	for _, tc := range []struct {
		name    string
		data    map[string]string
		managed []metav1.ManagedFieldsEntry
		want    bool
	}{
		{"empty, oria's only", nil, []metav1.ManagedFieldsEntry{pubOwner}, true},
		{"empty, nobody", nil, nil, true},
		{"another key left", map[string]string{"k": "v"}, nil, false},
		{"someone else wrote it", nil, []metav1.ManagedFieldsEntry{pubOwner, {Manager: "kubectl-create"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Disposable(tc.data, nil, tc.managed); got != tc.want {
				t.Errorf("Disposable = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRestartDecision(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }
	tp := func(d time.Duration) *metav1.Time { m := at(d); return &m }
	timing := Timing{Quiet: 3 * time.Second, MaxDelay: 30 * time.Second}
	restarted := oriav1alpha1.PublicationStatus{ConfigMap: "op/scope:namespaces", Namespaces: 2, Hash: "h1", LastChangeTime: tp(0), RestartedHash: "h1", LastRestartTime: tp(3 * time.Second)}
	for _, tc := range []struct {
		name      string
		prev      *oriav1alpha1.PublicationStatus
		hash      string
		restart   bool
		now       time.Duration
		want      oriav1alpha1.PublicationStatus
		wantDue   bool
		wantAfter time.Duration
	}{{
		name: "first publication waits for quiet", prev: nil, hash: "h1", restart: true, now: 0,
		want:      oriav1alpha1.PublicationStatus{ConfigMap: "op/scope:namespaces", Namespaces: 2, Hash: "h1", LastChangeTime: tp(0), PendingSince: tp(0)},
		wantAfter: 3 * time.Second,
	}, {
		name: "without restart labels nothing is pending", prev: nil, hash: "h1", restart: false, now: 0,
		want: oriav1alpha1.PublicationStatus{ConfigMap: "op/scope:namespaces", Namespaces: 2, Hash: "h1", LastChangeTime: tp(0)},
	}, {
		name: "unchanged and restarted: nothing to do", prev: &restarted, hash: "h1", restart: true, now: time.Hour,
		want: restarted,
	}, {
		name: "a change in a burst keeps the first pending time", hash: "h3", restart: true, now: 2 * time.Second,
		prev: &oriav1alpha1.PublicationStatus{Hash: "h2", LastChangeTime: tp(time.Second), PendingSince: tp(0), RestartedHash: "h1"},
		want: oriav1alpha1.PublicationStatus{ConfigMap: "op/scope:namespaces", Namespaces: 2, Hash: "h3",
			LastChangeTime: tp(2 * time.Second), PendingSince: tp(0), RestartedHash: "h1"},
		wantAfter: 3 * time.Second,
	}, {
		name: "quiet long enough: due", hash: "h2", restart: true, now: 4 * time.Second,
		prev: &oriav1alpha1.PublicationStatus{Hash: "h2", LastChangeTime: tp(time.Second), PendingSince: tp(0), RestartedHash: "h1"},
		want: oriav1alpha1.PublicationStatus{ConfigMap: "op/scope:namespaces", Namespaces: 2, Hash: "h2",
			LastChangeTime: tp(time.Second), PendingSince: tp(0), RestartedHash: "h1"},
		wantDue: true,
	}, {
		name: "changing for too long: due anyway", hash: "h9", restart: true, now: 31 * time.Second,
		prev: &oriav1alpha1.PublicationStatus{Hash: "h8", LastChangeTime: tp(30 * time.Second), PendingSince: tp(0), RestartedHash: "h1"},
		want: oriav1alpha1.PublicationStatus{ConfigMap: "op/scope:namespaces", Namespaces: 2, Hash: "h9",
			LastChangeTime: tp(31 * time.Second), PendingSince: tp(0), RestartedHash: "h1"},
		wantDue: true,
	}, {
		name: "back to the restarted list: nothing pending", hash: "h1", restart: true, now: 10 * time.Second,
		prev: &oriav1alpha1.PublicationStatus{Hash: "h2", LastChangeTime: tp(9 * time.Second), PendingSince: tp(9 * time.Second), RestartedHash: "h1"},
		want: oriav1alpha1.PublicationStatus{ConfigMap: "op/scope:namespaces", Namespaces: 2, Hash: "h1",
			LastChangeTime: tp(10 * time.Second), RestartedHash: "h1"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := Observe(tc.prev, "op/scope:namespaces", tc.hash, 2, tc.restart, at(tc.now))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			due, after := Due(got, tc.restart, t0.Add(tc.now), timing)
			if due != tc.wantDue || after != tc.wantAfter {
				t.Errorf("Due = %v, %s; want %v, %s", due, after, tc.wantDue, tc.wantAfter)
			}
		})
	}
}

func TestRestarted(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := oriav1alpha1.PublicationStatus{Hash: "h2", Namespaces: 5, PendingSince: &now, RestartedHash: "h1"}
	got := Restarted(st, []string{"Deployment/op"}, now)
	want := oriav1alpha1.PublicationStatus{Hash: "h2", Namespaces: 5, RestartedHash: "h2", LastRestartTime: &now,
		LastRestartNamespaces: 5, RestartedWorkloads: []string{"Deployment/op"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	if Restart(KindDeployment, "op", "d", "u", "h") == nil || Restart(KindStatefulSet, "op", "s", "u", "h") == nil ||
		Restart(KindDaemonSet, "op", "ds", "u", "h") == nil || Restart("Pod", "op", "p", "u", "h") != nil {
		t.Error("Restart kinds")
	}
	// The restart names the workload listed, by its UID.
	for _, kind := range WorkloadKinds {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(Restart(kind, "op", "w", "uid-1", "h"))
		if err != nil {
			t.Fatal(err)
		}
		if uid, _, _ := unstructured.NestedString(u, "metadata", "uid"); uid != "uid-1" {
			t.Errorf("Restart(%s): metadata.uid %q, want uid-1", kind, uid)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		want   string
	}{
		{nil, ""},
		{map[string]string{"intent": "projected", "app.kubernetes.io/name": "op"}, ""},
		{map[string]string{"bad key!": "x"}, `spec.publication.restartLabels: key "bad key!": `},
		{map[string]string{"k": "bad value!"}, `spec.publication.restartLabels: value "bad value!" of "k": `},
	} {
		err := Validate(&oriav1alpha1.Publication{RestartLabels: tc.labels})
		got := ""
		if err != nil {
			got = err.Error()
		}
		if tc.want == "" && got != "" || tc.want != "" && !strings.HasPrefix(got, tc.want) {
			t.Errorf("Validate(%v) = %q, want %q...", tc.labels, got, tc.want)
		}
	}
}
