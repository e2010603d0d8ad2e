package main

import (
	"encoding/json"
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

func TestGuardNamespaces(t *testing.T) {
	ns := guardNamespaces(3)
	if !reflect.DeepEqual(ns, []string{"bench-guard-000", "bench-guard-001", "bench-guard-002", "bench-guard-003"}) {
		t.Errorf("guardNamespaces(3) = %v", ns)
	}
	var slots []string
	for i := range ns {
		slots = append(slots, guardSlot(i, 3))
	}
	if !reflect.DeepEqual(slots, []string{"a", "none", "none", "b"}) {
		t.Errorf("slots = %v", slots)
	}
}

func TestGuardPatches(t *testing.T) {
	instance, policy, err := guardPatches(guardNamespaces(3))
	if err != nil {
		t.Fatal(err)
	}
	type spec struct {
		Spec struct {
			Namespaces        []string `json:"namespaces"`
			NamespaceSelector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"namespaceSelector"`
		} `json:"spec"`
	}
	decode := func(b []byte) spec {
		var s spec
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	// Both lists name 3 namespaces and differ: every write changes the
	// spec, so the guard checks each one.
	if a, b := decode(instance[0]).Spec.Namespaces, decode(instance[1]).Spec.Namespaces; !reflect.DeepEqual(a, []string{"bench-guard-000", "bench-guard-001", "bench-guard-002"}) ||
		!reflect.DeepEqual(b, []string{"bench-guard-001", "bench-guard-002", "bench-guard-003"}) {
		t.Errorf("instance patches = %v, %v", a, b)
	}
	for i, want := range []string{"a", "b"} {
		if got := decode(policy[i]).Spec.NamespaceSelector.MatchLabels; !reflect.DeepEqual(got, map[string]string{labelGuardSlot: want}) {
			t.Errorf("policy patch %d = %s", i, policy[i])
		}
	}
}

func TestGuardRoles(t *testing.T) {
	crds := guardCRDs()
	if len(crds) != guardAPIs || crds[1].Name != "gadget1s.guard.bench.oria.example.com" || crds[1].Labels["olm.operatorframework.io/owner-name"] != guardExtension {
		t.Fatalf("guardCRDs = %v", crds)
	}
	got := guardRoles([]string{crds[0].Name})
	if want := []string{"gadget0s.guard.bench.oria.example.com-view", "gadget0s.guard.bench.oria.example.com-view-crdview"}; !reflect.DeepEqual(got, want) {
		t.Errorf("guardRoles = %v, want %v", got, want)
	}
}

func TestExpandCount(t *testing.T) {
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{"", "apps"}, Resources: []string{"pods", "deployments"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}, // a duplicate
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}, ResourceNames: []string{"a", "b"}},
		{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}, // not granted in a namespace
	}
	if n := len(expandCount(rules)); n != 10 {
		t.Errorf("expandCount = %d, want 8 + 2", n)
	}
}

func TestGuardTargets(t *testing.T) {
	ms := func(p99 float64) *Latency { return &Latency{Count: 50, P50: p99 / 2, P99: p99, Max: p99} }
	r := &Report{Config: Sizes{GuardNamespaces: 100, GuardWrites: 50}, Results: []*Result{
		{Name: scenarioGuardInstance, Converged: true, Latency: ms(0.250)},
		{Name: scenarioGuardInstance + guardOffSuffix, Converged: true, Latency: ms(0.008)},
		{Name: scenarioGuardPolicy, Converged: true, Latency: ms(0.030)},
	}}
	r.evaluate()
	want := map[string]string{
		"guard: ScopeInstance over 100 namespaces, p99 of 50 writes":    "250ms (guard off 8ms) FAIL",
		"guard: RBACPolicy over a namespace selector, p99 of 50 writes": "30ms PASS", // no guard-off row
	}
	if got := targets(r); !reflect.DeepEqual(got, want) {
		t.Errorf("targets = %v, want %v", got, want)
	}

	// Below the target's sizes: shown, not judged.
	r.Config.GuardNamespaces = 10
	r.Results[2].Latency.Count = 20
	r.evaluate()
	for name, want := range map[string]string{
		"guard: ScopeInstance over 10 namespaces, p99 of 50 writes":     "250ms (guard off 8ms) n/a",
		"guard: RBACPolicy over a namespace selector, p99 of 50 writes": "30ms n/a",
	} {
		if got := targets(r)[name]; got != want {
			t.Errorf("target %q = %q, want %q", name, got, want)
		}
	}

	r.Results[0].Converged = false
	r.evaluate()
	if got := targets(r)["guard: ScopeInstance over 10 namespaces, p99 of 50 writes"]; got != "did not finish FAIL" {
		t.Errorf("stopped series = %q", got)
	}
	// A refused write stops the series: the target fails.
	r.Results[0].Converged, r.Results[0].Error = false, "write 3: forbidden"
	r.evaluate()
	if got := targets(r)["guard: ScopeInstance over 10 namespaces, p99 of 50 writes"]; got != "a write failed (see below) FAIL" {
		t.Errorf("refused series = %q", got)
	}
}
