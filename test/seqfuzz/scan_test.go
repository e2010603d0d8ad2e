package seqfuzz

import (
	"os"
	"testing"
)

// shapes are the orders of steps the cases of issue 38 need, as the
// generator writes them (without running anything). TestScanSeeds lists
// the first seeds whose sequences have a shape; running those seeds is
// how the finder seeds were confirmed (findings.go).
var shapes = map[string][]func(Step) bool{
	// 1: an admin's gated grant (a selector, pending), then D's template
	// naming a gate.
	"case1": {
		func(s Step) bool {
			return s.Op == OpAdminGrant && s.C%len(adminTargets) == 2 && s.D%len(windowChoices) == 1
		},
		func(s Step) bool { return s.Op == OpDGrant && s.A%len(dRoleChoices) == 3 },
	},
	// 3: D delegates to herself in d (no window), the admin re-creates d,
	// then D writes a window.
	"case3": {
		func(s Step) bool {
			return s.Op == OpDGrant && s.A%len(dRoleChoices) < 3 && s.B%3 == 0 && s.C%len(dTargets) == 0 && s.D%3 == 0
		},
		func(s Step) bool { return s.Op == OpAdminRecreateNS && pick(namespaceKeys, s.A) == "d" },
		func(s Step) bool { return s.Op == OpDWindow },
	},
	// 4: D delegates to herself in d, the admin re-creates d, S writes the
	// namespaces' UIDs, then oria starts or the namespace changes.
	"case4": {
		func(s Step) bool {
			return s.Op == OpDGrant && s.A%len(dRoleChoices) < 3 && s.B%3 == 0 && s.C%len(dTargets) == 0
		},
		func(s Step) bool { return s.Op == OpAdminRecreateNS && pick(namespaceKeys, s.A) == "d" },
		func(s Step) bool { return s.Op == OpSPinUIDs },
		func(s Step) bool { return s.Op == OpOriaStart || s.Op == OpAdminToggleLabel },
	},
	// 4 through observedGeneration: as 4, S writes status.observedGeneration.
	"case4gen": {
		func(s Step) bool {
			return s.Op == OpDGrant && s.A%len(dRoleChoices) < 3 && s.B%3 == 0 && s.C%len(dTargets) == 0
		},
		func(s Step) bool { return s.Op == OpAdminRecreateNS && pick(namespaceKeys, s.A) == "d" },
		func(s Step) bool { return s.Op == OpSObservedGen },
		func(s Step) bool { return s.Op == OpOriaStart || s.Op == OpAdminToggleLabel },
	},
	// A leader change across a window end: an admin grant open now and
	// ending soon (9 to 14 s), then a leader change (it kills the leader
	// just before that end).
	"leaderend": {
		func(s Step) bool {
			return s.Op == OpAdminGrant && s.D%len(windowChoices) == 2
		},
		func(s Step) bool { return s.Op == OpLeaderChange },
	},
	// N binds an admin's gated grant of the extension's API with a plain
	// RoleBinding while the gate is empty (Kubernetes' escalation check
	// passes: an empty role grants nothing), no guard involved.
	"nbind": {
		func(s Step) bool {
			gadgets := s.A%2 == 1 && s.B%3 < 2 || s.A%2 == 0 && s.B%len(adminRoleChoices) == 4
			return s.Op == OpAdminGrant && s.C%len(adminTargets) == 2 && s.D%len(windowChoices) == 1 && gadgets
		},
		func(s Step) bool { return s.Op == OpNBind && s.A%len(nRoleChoices) == 0 && s.E == latest && s.B%2 == 0 },
	},
}

// TestFinderShapes: every finder seed's sequence (and every other
// finding's with a shape) still has the shape of its case (a change of the generator changes every seed's sequence).
func TestFinderShapes(t *testing.T) {
	for _, f := range append(append([]Finder(nil), finderSeeds...), otherFindings...) {
		if f.Shape == "" {
			continue
		}
		shape, ok := shapes[f.Shape]
		if !ok {
			t.Errorf("seed %d: no shape %q", f.Seed, f.Shape)
			continue
		}
		if !hasShape(Generate(f.Seed), shape) {
			t.Errorf("seed %d no longer has the shape of %s: the generator changed; find a new seed (ORIA_SEQFUZZ_SCAN=%s)\n%s",
				f.Seed, f.Case, f.Shape, Generate(f.Seed))
		}
	}
}

// hasShape reports whether seq has the steps of shape, in that order.
func hasShape(seq Sequence, shape []func(Step) bool) bool {
	i := 0
	for _, s := range seq {
		if i < len(shape) && shape[i](s) {
			i++
		}
	}
	return i == len(shape)
}

// TestScanSeeds (ORIA_SEQFUZZ_SCAN=case1|case3|case4) lists seeds whose
// sequence has the case's shape, and how common the shape is.
func TestScanSeeds(t *testing.T) {
	name := os.Getenv("ORIA_SEQFUZZ_SCAN")
	if name == "" {
		t.Skip("set ORIA_SEQFUZZ_SCAN to list seeds")
	}
	shape, ok := shapes[name]
	if !ok {
		t.Fatalf("no shape %q", name)
	}
	const n = 20000
	var found []uint64
	for seed := uint64(0); seed < n; seed++ {
		if hasShape(Generate(seed), shape) {
			found = append(found, seed)
		}
	}
	t.Logf("%s: %d of %d seeds (%.1f%%); first: %v", name, len(found), n, 100*float64(len(found))/n, found[:min(len(found), 15)])
}
