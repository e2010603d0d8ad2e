package seqfuzz

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/operator-framework/oria/internal/testutil"
)

// fixedSeeds are the sequences `make test` runs: deterministic (no random
// exploration), a few minutes in all: the regression seeds and the finder
// seeds (findings.go).
func fixedSeeds() []uint64 {
	seeds := append([]uint64(nil), regressionSeeds...)
	for _, f := range finderSeeds {
		seeds = append(seeds, f.Seed)
	}
	return seeds
}

// finder returns the finder seed's record, if seed is one.
func finder(seed uint64) (Finder, bool) {
	for _, f := range finderSeeds {
		if f.Seed == seed {
			return f, true
		}
	}
	return Finder{}, false
}

// Environment of the exploration (make fuzz-sequences):
// ORIA_SEQFUZZ_TIME explores new seeds for that long; ORIA_SEQFUZZ_SEEDS
// (comma-separated, or "other" for otherFindings) runs those seeds instead;
// ORIA_SEQFUZZ_SHRINK is the time shrinking may take (0: none; by default 5m
// for a seed given; for an exploration, 10m in all, the first failure of
// each kind, at most 4m each).
const (
	envTime   = "ORIA_SEQFUZZ_TIME"
	envSeeds  = "ORIA_SEQFUZZ_SEEDS"
	envShrink = "ORIA_SEQFUZZ_SHRINK"
	// envVerbose logs every explored run's steps, not only the failing ones.
	envVerbose = "ORIA_SEQFUZZ_VERBOSE"
)

// TestSequences runs the fixed seeds. A regression seed that fails is
// shrunk; a finder seed is not (its comment has the shortest sequence):
// its failure says which case of which issue it found, and what it found
// then.
func TestSequences(t *testing.T) {
	testutil.NeedCluster(t)
	began := time.Now()
	for _, seed := range fixedSeeds() {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			budget := shrinkBudget(90 * time.Second)
			f, isFinder := finder(seed)
			if isFinder {
				budget = 0
				t.Cleanup(func() {
					if t.Failed() {
						t.Logf("finder seed %d (%s) still fails: %s.\nBefore the fix it found: %s", seed, f.Shape, f.Case, f.Found)
					}
				})
			}
			runSeed(t, seed, budget)
		})
	}
	t.Logf("%d fixed seeds in %s", len(fixedSeeds()), time.Since(began).Round(time.Second))
}

// TestExploreSequences explores new seeds for ORIA_SEQFUZZ_TIME (or runs
// ORIA_SEQFUZZ_SEEDS); skipped when neither is set.
func TestExploreSequences(t *testing.T) {
	testutil.NeedCluster(t)
	if seeds := os.Getenv(envSeeds); seeds != "" {
		if seeds == "other" { // the findings beyond the fixed list
			seeds = ""
			for _, f := range otherFindings {
				seeds += fmt.Sprintf("%d,", f.Seed)
			}
			seeds = strings.TrimSuffix(seeds, ",")
		}
		for _, s := range strings.Split(seeds, ",") {
			seed, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", envSeeds, err)
			}
			t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runSeed(t, seed, shrinkBudget(5*time.Minute)) })
		}
		return
	}
	d, err := time.ParseDuration(os.Getenv(envTime))
	if err != nil || d <= 0 {
		t.Skipf("set %s (make fuzz-sequences FUZZTIME=10m) to explore", envTime)
	}
	base := uint64(time.Now().UnixNano())
	t.Logf("exploring for %s from seed %d", d, base)
	ctx := context.Background()
	deadline := time.Now().Add(d)
	var seqs, steps, leaders int
	var failed []*Result
	began := time.Now()
	for i := uint64(0); time.Now().Before(deadline); i++ {
		seed := base + i
		res, err := Run(ctx, env, seed, Generate(seed))
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		seqs, steps = seqs+1, steps+res.Ran
		lc := leaderChanges(res.Seq[:res.Ran])
		leaders += lc
		if res.Failed() || os.Getenv(envVerbose) != "" {
			t.Log(res)
		} else {
			t.Logf("seed %d: %d steps (%d leader changes), %s, no violation", seed, res.Ran, lc, res.Duration.Round(100*time.Millisecond))
		}
		if res.Failed() {
			failed = append(failed, res)
		}
	}
	explored := time.Since(began)
	t.Logf("explored %d sequences, %d steps (%d leader changes) in %s (%.1f sequences and %.1f steps a minute), %d violating",
		seqs, steps, leaders, explored.Round(time.Second), float64(seqs)/explored.Minutes(), float64(steps)/explored.Minutes(), len(failed))
	// Shrink the first failure of each kind (the same probes violated),
	// within one budget for all.
	budget := shrinkBudget(10 * time.Minute)
	shrunk := map[string]uint64{}
	for _, res := range failed {
		sig := signature(res)
		if first, ok := shrunk[sig]; ok {
			t.Errorf("VIOLATION, seed %d: the same probes as seed %d (not shrunk):\n%s", res.Seed, first, res)
			continue
		}
		shrunk[sig] = res.Seed
		start := time.Now()
		t.Error(report(t, res, min(budget, 4*time.Minute)))
		budget -= time.Since(start)
	}
}

// leaderChanges counts the leader changes of seq.
func leaderChanges(seq Sequence) int {
	n := 0
	for _, s := range seq {
		if s.Op == OpLeaderChange {
			n++
		}
	}
	return n
}

// signature is what kind of failure a run found: its violated probes,
// the namespace incarnations aside.
func signature(res *Result) string {
	var parts []string
	for _, v := range res.Violations {
		parts = append(parts, fmt.Sprintf("%v/%s/%d/%s", v.Liveness, v.Subject, v.Cap, v.NS))
	}
	slices.Sort(parts)
	return strings.Join(slices.Compact(parts), " ")
}

func runSeed(t *testing.T, seed uint64, budget time.Duration) {
	seq := Generate(seed)
	t.Logf("seed %d:\n%s", seed, seq)
	res, err := Run(context.Background(), env, seed, seq)
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	t.Log(res)
	if res.Failed() {
		t.Error(report(t, res, budget))
	}
}

// report shrinks a failing run and describes it: the seed, the violations
// and the shortest sequence that still fails, with its log.
func report(t *testing.T, res *Result, budget time.Duration) string {
	small := res
	if budget > 0 {
		small = Shrink(context.Background(), env, res, budget, t.Logf)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "VIOLATION, seed %d (replay: %s=%d make fuzz-sequences)\n", res.Seed, envSeeds, res.Seed)
	for _, v := range res.Violations {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	if small == res {
		return b.String() + "(not shrunk; the run's steps are logged above)"
	}
	fmt.Fprintf(&b, "shortest failing sequence found: %d of the %d steps, replayed:\n", len(small.Seq), len(res.Seq))
	for _, l := range small.Log {
		fmt.Fprintf(&b, "    %s\n", l)
	}
	for _, v := range small.Violations {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	return b.String()
}

func shrinkBudget(def time.Duration) time.Duration {
	if s := os.Getenv(envShrink); s != "" {
		if d, err := time.ParseDuration(s); err == nil {
			return d
		}
	}
	return def
}
