package seqfuzz

import (
	"context"
	"slices"
	"time"
)

// Shrink looks for the shortest part of a failing run's sequence that
// still fails the same way (an escalation, or a liveness failure when the
// run found no escalation): it removes chunks of steps, halves first, then
// smaller, down to single steps (delta debugging, greedy), replaying each
// candidate on a fresh World, until nothing more can go or budget is
// spent. logf reports each attempt. It returns the smallest failing run.
func Shrink(ctx context.Context, e *Env, failed *Result, budget time.Duration, logf func(string, ...any)) *Result {
	deadline := time.Now().Add(budget)
	escalation := slices.ContainsFunc(failed.Violations, func(v Violation) bool { return !v.Liveness })
	same := func(r *Result) bool {
		return slices.ContainsFunc(r.Violations, func(v Violation) bool { return v.Liveness != escalation })
	}
	best := failed
	// Steps after the failing quiet point never ran: drop them first.
	seq := slices.Clone(failed.Seq[:failed.Ran])
	for chunk := len(seq) / 2; chunk >= 1; chunk /= 2 {
		for start := 0; start+chunk <= len(seq); {
			if time.Now().After(deadline) || ctx.Err() != nil {
				logf("shrink: budget of %s spent", budget)
				return best
			}
			candidate := slices.Concat(seq[:start], seq[start+chunk:])
			if len(candidate) == 0 {
				break
			}
			r, err := Run(ctx, e, failed.Seed, candidate)
			if err != nil {
				logf("shrink: run failed: %v", err)
				return best
			}
			if r.Failed() && same(r) {
				logf("shrink: %d steps still fail", len(candidate))
				seq, best = slices.Clone(r.Seq[:r.Ran]), r
				continue // the same start, now the next chunk
			}
			logf("shrink: without steps %d..%d it passes", start+1, start+chunk)
			start += chunk
		}
	}
	return best
}
