package binding

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"
	"k8s.io/utils/ptr"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/ownership"
)

func TestGated(t *testing.T) {
	at := &metav1.Time{}
	many := make([]string, SmallGrant+1)
	selector := &metav1.LabelSelector{}
	for _, tc := range []struct {
		name string
		spec oriav1alpha1.ScopeInstanceSpec
		want bool
	}{
		{"time-bound selector", oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: selector, ExpiresAt: at}, true},
		{"time-bound, many listed", oriav1alpha1.ScopeInstanceSpec{Namespaces: many, NotBefore: at}, true},
		{"time-bound, SmallGrant listed", oriav1alpha1.ScopeInstanceSpec{Namespaces: many[:SmallGrant], ExpiresAt: at}, false},
		{"selector without a window", oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: selector}, false},
		{"time-bound cluster-wide", oriav1alpha1.ScopeInstanceSpec{ExpiresAt: at}, false},
		{"time-bound selector with a ceiling", oriav1alpha1.ScopeInstanceSpec{NamespaceSelector: selector, ExpiresAt: at,
			ServiceAccount: &oriav1alpha1.ServiceAccountReference{Name: "sa", Namespace: "ns"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Gated(tc.spec); got != tc.want {
				t.Errorf("Gated = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestGateName(t *testing.T) {
	a, b := GateName("team-a", "uid-1"), GateName("team-a", "uid-2")
	if a == b {
		t.Errorf("an instance created again gets the same gate %q", a)
	}
	if !strings.HasPrefix(a, "oria-window-team-a-") {
		t.Errorf("GateName = %q, want it to name the instance", a)
	}
	long := GateName(strings.Repeat("x", 253), "uid")
	if errs := validation.IsDNS1123Subdomain(long); len(errs) > 0 {
		t.Errorf("GateName of a long instance = %q: %v", long, errs)
	}
}

func TestGateRole(t *testing.T) {
	inst := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "team-a", UID: "uid-1"}}
	pods := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}
	widgets := rbacv1.PolicyRule{APIGroups: []string{"example.com"}, Resources: []string{"widgets"}, Verbs: []string{"list"}}
	sources := []GateSource{{Name: "b-role", Rules: []rbacv1.PolicyRule{widgets, pods}}, {Name: "a-role", Rules: []rbacv1.PolicyRule{pods}}, {Name: "missing"}}
	meta := metav1.ObjectMeta{
		Name:            GateName("team-a", "uid-1"),
		Labels:          ownership.GateLabels("team-a"),
		Annotations:     map[string]string{oriav1alpha1.AnnotationGateRoles: "a-role,b-role,missing"},
		OwnerReferences: []metav1.OwnerReference{ownership.Ref(ownership.KindScopeInstance, "team-a", "uid-1")},
		Finalizers:      []string{metav1.FinalizerDeleteDependents},
	}
	typeMeta := metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}
	seal := ownership.GateSeal(GateName("team-a", "uid-1"))
	for _, tc := range []struct {
		name string
		open bool
		want *rbacv1.ClusterRole
	}{
		{"open: the seal, then every source's rules, sorted by source, once each", true,
			&rbacv1.ClusterRole{TypeMeta: typeMeta, ObjectMeta: meta, Rules: []rbacv1.PolicyRule{seal, pods, widgets}}},
		{"closed: the seal alone, the same sources", false, &rbacv1.ClusterRole{TypeMeta: typeMeta, ObjectMeta: meta, Rules: []rbacv1.PolicyRule{seal}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := GateRole(inst, sources, tc.open)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("GateRole (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"a-role", "b-role", "missing"}, GateRoles(got)); diff != "" {
				t.Errorf("GateRoles (-want +got):\n%s", diff)
			}
			if _, ok := got.Labels[oriav1alpha1.LabelScopeTemplate]; ok {
				t.Errorf("a gate carries the template label: the ScopeTemplate controller would take it for an inline role")
			}
		})
	}
	// The copy is the gate's own: changing a source's rules afterwards
	// does not change the gate.
	got := GateRole(inst, sources, true)
	sources[1].Rules[0].Verbs[0] = "delete"
	if got.Rules[1].Verbs[0] != "get" {
		t.Errorf("the gate shares its rules with a source")
	}
}

func TestGateSources(t *testing.T) {
	pods := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}
	secrets := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}
	tmpl := &oriav1alpha1.ScopeTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}, Spec: oriav1alpha1.ScopeTemplateSpec{
		ClusterRoles: []oriav1alpha1.ClusterRoleTemplate{{Name: "inline", Rules: []rbacv1.PolicyRule{pods}}, {Name: "referenced"}, {Name: "gone"}}}}
	live := map[string][]rbacv1.PolicyRule{
		"inline":     {secrets}, // the cluster's inline role not yet the template's: the template's rules count
		"referenced": {secrets},
	}
	got, err := GateSources(tmpl, []string{"inline", "referenced", "gone"}, func(name string) ([]rbacv1.PolicyRule, error) { return live[name], nil })
	if err != nil {
		t.Fatal(err)
	}
	want := []GateSource{{Name: "inline", Rules: []rbacv1.PolicyRule{pods}}, {Name: "referenced", Rules: []rbacv1.PolicyRule{secrets}}, {Name: "gone"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GateSources (-want +got):\n%s", diff)
	}
	if _, err := GateSources(tmpl, []string{"referenced"}, func(string) ([]rbacv1.PolicyRule, error) { return nil, errors.New("cache not synced") }); err == nil {
		t.Errorf("an error reading a role is not returned")
	}
}

// TestNarrowGate: the gate of a grant no checked template backs keeps at
// most the rules it holds (issue 38, case 2: its annotation, which anyone
// who may patch ClusterRoles can write, named admin and view while the
// grant was pending; at notBefore oria filled it with admin's rules).
func TestNarrowGate(t *testing.T) {
	pods := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}
	secrets := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}
	for _, tc := range []struct {
		name      string
		want, cur []rbacv1.PolicyRule
		out       []rbacv1.PolicyRule
	}{
		{"empty (pending) stays empty", []rbacv1.PolicyRule{secrets, pods}, nil, nil},
		{"a source narrowed is narrowed", []rbacv1.PolicyRule{pods}, []rbacv1.PolicyRule{pods, secrets}, []rbacv1.PolicyRule{pods}},
		{"a source widened is not", []rbacv1.PolicyRule{pods, secrets}, []rbacv1.PolicyRule{pods}, []rbacv1.PolicyRule{pods}},
		{"closed: nothing", nil, []rbacv1.PolicyRule{pods}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := NarrowGate(&rbacv1.ClusterRole{Rules: tc.want}, &rbacv1.ClusterRole{Rules: tc.cur})
			want := append([]rbacv1.PolicyRule{ownership.GateSeal("")}, tc.out...)
			if diff := cmp.Diff(want, got.Rules); diff != "" {
				t.Errorf("NarrowGate (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGateSeal: a gate, empty or filled, holds a permission only cluster
// admins hold, so that nobody else may bind it (a RoleBinding of an empty
// gate by a namespace admin gained the grant once oria filled it: the
// sequence fuzzer's seeds 2387 and 226); the seal alone grants nothing.
func TestGateSeal(t *testing.T) {
	inst := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "team-a", UID: "uid-1"}}
	pods := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}
	empty := GateRole(inst, []GateSource{{Name: "r", Rules: []rbacv1.PolicyRule{pods}}}, false)
	full := GateRole(inst, []GateSource{{Name: "r", Rules: []rbacv1.PolicyRule{pods}}}, true)
	if ownership.GateGrants(empty) || !ownership.GateGrants(full) {
		t.Errorf("GateGrants: empty %v, full %v", ownership.GateGrants(empty), ownership.GateGrants(full))
	}
	admin := []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}
	if ok, _ := rbacvalidation.Covers(admin, empty.Rules); ok {
		t.Errorf("a namespace's every resource covers the empty gate %v: anyone admin of a namespace may bind it", empty.Rules)
	}
	clusterAdmin := append(admin, rbacv1.PolicyRule{NonResourceURLs: []string{"*"}, Verbs: []string{"*"}})
	if ok, _ := rbacvalidation.Covers(clusterAdmin, full.Rules); !ok {
		t.Errorf("cluster-admin does not cover the gate %v", full.Rules)
	}
}

// TestHoldGate: the bindings of the gate, and only those, get a second
// owner reference, to the gate by its UID, that blocks its deletion; the
// controller reference stays first, and the held bindings share one slice.
func TestHoldGate(t *testing.T) {
	inst := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "team-a", UID: "uid-1"}}
	gate := GateName("team-a", "uid-1")
	rbs := RoleBindings(inst, "tmpl", []string{gate, "view"}, []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}, []string{"a", "b"})
	require.Len(t, rbs, 4)
	hold := GateHold(gate, "gate-uid")
	assert.Equal(t, metav1.OwnerReference{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: gate, UID: "gate-uid", BlockOwnerDeletion: ptr.To(true)}, hold)
	HoldGate(rbs, hold)
	var held [][]metav1.OwnerReference
	for _, rb := range rbs {
		if rb.RoleRef.Name != gate {
			assert.Len(t, rb.OwnerReferences, 1, "a binding of another role holds nothing")
			continue
		}
		require.Len(t, rb.OwnerReferences, 2)
		assert.Equal(t, ownership.Ref(ownership.KindScopeInstance, "team-a", "uid-1"), rb.OwnerReferences[0])
		assert.Equal(t, hold, rb.OwnerReferences[1])
		held = append(held, rb.OwnerReferences)
	}
	require.Len(t, held, 2)
	assert.Same(t, &held[0][0], &held[1][0], "the held bindings share one owner slice")
	HoldGate(rbs, hold)
	for _, rb := range rbs {
		assert.LessOrEqual(t, len(rb.OwnerReferences), 2, "holding twice adds nothing")
	}
}

// EmptiedGate leaves a gate its seal alone, without an aggregationRule,
// its finalizer kept; an empty gate (and no gate) needs no write.
func TestEmptiedGate(t *testing.T) {
	inst := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "inst", UID: "uid"}}
	sources := []GateSource{{Name: "pod-reader", Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}}
	filled, empty := GateRole(inst, sources, true), GateRole(inst, sources, false)
	got := EmptiedGate(filled)
	if got == nil || !equality.Semantic.DeepEqual(got.Rules, empty.Rules) || got.AggregationRule != nil || len(got.Finalizers) != 1 {
		t.Fatalf("EmptiedGate(filled) = %+v, want its seal alone, its finalizer kept", got)
	}
	if ownership.GateGrants(got) {
		t.Errorf("an emptied gate grants: %v", got.Rules)
	}
	if len(filled.Rules) < 2 {
		t.Errorf("the filled gate was changed: %v", filled.Rules)
	}
	aggregated := empty.DeepCopy()
	aggregated.AggregationRule = &rbacv1.AggregationRule{}
	if EmptiedGate(aggregated) == nil {
		t.Errorf("an aggregationRule is removed")
	}
	if EmptiedGate(empty) != nil || EmptiedGate(nil) != nil {
		t.Errorf("an empty gate, or none, needs no write")
	}
	cur, emptied := EmptiedGates([]*rbacv1.ClusterRole{nil, empty, filled})
	if len(cur) != 1 || cur[0] != filled || len(emptied) != 1 {
		t.Errorf("EmptiedGates = %v, %v; want the filled gate alone", cur, emptied)
	}
}
