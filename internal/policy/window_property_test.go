package policy

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
)

// edgeInstants are the instants at the edges of what oria accepts: the zero
// time (which metav1.Time encodes as null), the year -1 in UTC (year 0 with
// a positive offset), 0001, just before and at 1970, fractions either side
// of a second, the last second of 9999 and past it, the year 10000 in UTC
// (9999 with a negative offset).
func edgeInstants(t *testing.T) []time.Time {
	parse := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		return v
	}
	return []time.Time{
		{},
		parse("0000-01-01T00:00:00+01:00"),
		parse("0001-01-01T00:00:00Z"),
		parse("0001-01-01T00:00:00.5Z"),
		parse("1969-12-31T23:59:59Z"),
		parse("1969-12-31T23:59:59.999999999Z"),
		oriav1alpha1.EarliestInstant,
		parse("1970-01-01T00:00:00.000000001Z"),
		parse("2025-06-06T12:00:00.2Z"),
		parse("2025-06-06T12:00:00.8Z"),
		parse("2025-06-06T13:00:00+01:00"),
		parse("9999-12-31T23:59:58.5Z"),
		oriav1alpha1.LatestInstant,
		parse("9999-12-31T23:59:59.5Z"),
		parse("9999-12-31T23:59:59-01:00"),
		time.Date(10001, 1, 1, 0, 0, 0, 0, time.UTC),
	}
}

// sweepInstants are n instants from a fixed pseudo-random source (the same
// on every run): years -2 to 10001, any second and nanosecond, some on a
// whole second.
func sweepInstants(n int) []time.Time {
	rng := rand.New(rand.NewPCG(40, 2025))
	out := make([]time.Time, n)
	for i := range out {
		year := rng.IntN(10004) - 2
		if rng.IntN(2) == 0 {
			year = 1965 + rng.IntN(100) // near now and 1970 more often
		}
		nsec := rng.IntN(1e9)
		if rng.IntN(4) == 0 {
			nsec = 0
		}
		out[i] = time.Date(year, time.January, 1, 0, 0, 0, nsec, time.UTC).Add(time.Duration(rng.Int64N(int64(366 * 24 * time.Hour))).Truncate(time.Second))
		if rng.IntN(3) == 0 {
			out[i] = out[i].In(time.FixedZone("", (rng.IntN(27)-12)*3600))
		}
	}
	return out
}

// TestCompiledWindowProperties (issue 40): for every pair of bounds (each
// absent, an edge instant or one of a deterministic sweep), the compiled
// ScopeInstance's window is bounded on a side exactly when the policy's
// is (a bound is never "no bound", not even the zero time), in whole
// seconds within [EarliestInstant, LatestInstant], never wider than the
// policy's, empty exactly when the policy's is as compiled, and it encodes
// and decodes to itself; the policy's window survives its own JSON round
// trip as a bound too.
func TestCompiledWindowProperties(t *testing.T) {
	edges := len(edgeInstants(t))
	instants := append(edgeInstants(t), sweepInstants(300)...)
	bound := func(i int) *metav1.Time {
		if i < 0 {
			return nil
		}
		return &metav1.Time{Time: instants[i]}
	}
	checked := 0
	for i := -1; i < len(instants); i++ {
		for j := -1; j < len(instants); j++ {
			if i >= 0 && j >= 0 && (i+j)%7 != 0 && i >= edges && j >= edges {
				continue // every edge against everything, and a seventh of the sweep's pairs
			}
			checked++
			nb, exp := bound(i), bound(j)
			p := policy(oriav1alpha1.AccessView, window(nb, exp))
			c := Compile(p, crds)
			got := binding.InstanceWindow(c.Instance.Spec)
			if (got.NotBefore != nil) != (nb != nil) || (got.ExpiresAt != nil) != (exp != nil) {
				t.Fatalf("notBefore %v, expiresAt %v: compiled to %v, %v: bounded on another side", nb, exp, got.NotBefore, got.ExpiresAt)
			}
			for _, b := range []*metav1.Time{got.NotBefore, got.ExpiresAt} {
				if b != nil && (b.Nanosecond() != 0 || binding.OutOfRange(b.Time) || b.Location() != time.UTC) {
					t.Fatalf("notBefore %v, expiresAt %v: compiled bound %v is not a whole second in UTC within range", nb, exp, b)
				}
			}
			if nb != nil && !binding.OutOfRange(nb.Time) && got.NotBefore.Before(nb) {
				t.Fatalf("notBefore %v compiled earlier: %v", nb, got.NotBefore)
			}
			if exp != nil && !binding.OutOfRange(exp.Time) && exp.Before(got.ExpiresAt) {
				t.Fatalf("expiresAt %v compiled later: %v", exp, got.ExpiresAt)
			}
			if w := binding.PolicyWindow(p.Spec); w.Empty() != got.Empty() || (!binding.OutOfRange(instantOf(nb)) && !binding.OutOfRange(instantOf(exp)) && got.Widens(w)) {
				t.Fatalf("notBefore %v, expiresAt %v: compiled %v, %v: empty %v (policy's %v), or wider", nb, exp, got.NotBefore, got.ExpiresAt, got.Empty(), w.Empty())
			}
			roundTrip(t, c.Instance.Spec, p.Spec)
		}
	}
	t.Logf("%d windows checked (%d instants, %d of them edges)", checked, len(instants), edges)
}

// instantOf is the instant of a bound, or one in range for none.
func instantOf(b *metav1.Time) time.Time {
	if b == nil {
		return oriav1alpha1.EarliestInstant
	}
	return b.Time
}

// roundTrip checks that the compiled spec encodes and decodes to itself,
// and that the policy, decoded from its bounds as written, keeps each bound
// and compiles to the same window.
func roundTrip(t *testing.T, spec oriav1alpha1.ScopeInstanceSpec, ps oriav1alpha1.RBACPolicySpec) {
	t.Helper()
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var again oriav1alpha1.ScopeInstanceSpec
	if err := json.Unmarshal(b, &again); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	w, back := binding.InstanceWindow(spec), binding.InstanceWindow(again)
	if !sameBound(w.NotBefore, back.NotBefore) || !sameBound(w.ExpiresAt, back.ExpiresAt) {
		t.Fatalf("%s decodes to %v, %v: not %v, %v", b, back.NotBefore, back.ExpiresAt, w.NotBefore, w.ExpiresAt)
	}
	// The policy as the API server would hand it over: each bound as the
	// string it was written as (RFC 3339), when that string parses at all.
	raw := map[string]any{"extensionName": ps.ExtensionName, "access": ps.Access}
	for k, b := range map[string]*metav1.Time{"notBefore": ps.NotBefore, "expiresAt": ps.ExpiresAt} {
		if b == nil {
			continue
		}
		str := b.Format(time.RFC3339Nano)
		if _, err := time.Parse(time.RFC3339, str); err != nil {
			return // no such string is stored (a year before 0 or after 9999)
		}
		raw[k] = str
	}
	pb, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	var decoded oriav1alpha1.RBACPolicySpec
	if err := json.Unmarshal(pb, &decoded); err != nil {
		t.Fatalf("%s: %v", pb, err)
	}
	if (decoded.NotBefore != nil) != (ps.NotBefore != nil) || (decoded.ExpiresAt != nil) != (ps.ExpiresAt != nil) {
		t.Fatalf("policy %s decodes to %v, %v: a bound lost", pb, decoded.NotBefore, decoded.ExpiresAt)
	}
	if d, c := binding.PolicyWindow(decoded).Whole(), binding.PolicyWindow(ps).Whole(); !sameBound(d.NotBefore, c.NotBefore) || !sameBound(d.ExpiresAt, c.ExpiresAt) {
		t.Fatalf("policy %s compiles to %v, %v once decoded, not %v, %v", pb, d.NotBefore, d.ExpiresAt, c.NotBefore, c.ExpiresAt)
	}
}

func sameBound(a, b *metav1.Time) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Equal(b))
}
