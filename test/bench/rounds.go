package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
)

// Round is one round of a row measured -repeat times: the floor's time
// (without a client-side limit) and oria's.
type Round struct {
	Floor float64 `json:"floor,omitempty"`
	Oria  float64 `json:"oria"`
	// ApplyFloor is the floor from the user's apply (-apply-floor).
	ApplyFloor float64 `json:"applyFloor,omitempty"`
}

// phases are what a row measured in rounds does in each round.
type phases struct {
	// floors measures the floors (measureFloors), filling the floor fields
	// of the result it is given, after a warm-up run when warmup is set.
	floors func(ctx context.Context, r *Result, warmup bool) error
	// oria triggers oria and measures its convergence into r (converge).
	oria func(ctx context.Context, r *Result) error
	// undo takes oria's work of a round away again (not after the last
	// round), so that the next round starts from the same state.
	undo func(ctx context.Context) error
}

// measureRounds measures a row n times, each round the floor first and
// then oria, so that a slow spell of a shared machine falls on either
// side alike; a short phase (one to a few seconds) moves by 20 % and more
// from one measurement to the next there. The row shows the round with
// oria's median time (its resource figures, and its time), and the median
// of the floors' times; Rounds lists every round, and PeakRSS is the
// highest of all rounds.
func (b *bench) measureRounds(ctx context.Context, r *Result, n int, p phases) error {
	var results []*Result
	for i := range n {
		if n > 1 {
			b.logf("%s: round %d of %d", r.Name, i+1, n)
		}
		rr := &Result{Name: r.Name, Objects: r.Objects}
		// Only the first round's floor warms up: later ones follow oria's
		// previous round, which wrote and removed as much.
		if err := p.floors(ctx, rr, i == 0 && b.cfg.floorWarmup); err != nil {
			return err
		}
		err := p.oria(ctx, rr)
		results = append(results, rr)
		if err != nil || !rr.Converged {
			mergeRounds(r, results)
			return err
		}
		if i < n-1 {
			if err := p.undo(ctx); err != nil {
				return fmt.Errorf("%s: undoing round %d: %w", r.Name, i+1, err)
			}
			if err := b.settle(ctx, "after undoing round "+fmt.Sprint(i+1)); err != nil {
				return err
			}
		}
	}
	mergeRounds(r, results)
	if n > 1 {
		b.logf("%s: %s", r.Name, describeRounds(r.Rounds))
	}
	return nil
}

// mergeRounds makes r the row of rounds: the round with oria's median time
// (the lower of the middle two for an even count; the last round when one
// did not converge), the floors' median, every round's times, and the
// highest peak RSS.
func mergeRounds(r *Result, rounds []*Result) {
	if len(rounds) == 0 {
		return
	}
	pick := rounds[len(rounds)-1]
	if pick.Converged {
		pick = medianBy(rounds, func(x *Result) float64 { return x.Seconds })
	}
	name, objects, warmup := r.Name, r.Objects, rounds[0].FloorWarmupSeconds
	*r = *pick
	r.Name, r.Objects, r.FloorWarmupSeconds = name, objects, warmup
	r.Rounds = nil
	var floors, applyFloors []*Result
	for _, x := range rounds {
		if len(rounds) > 1 {
			r.Rounds = append(r.Rounds, Round{Floor: x.FloorSeconds, Oria: x.Seconds, ApplyFloor: x.ApplyFloorSeconds})
		}
		r.PeakRSS = max(r.PeakRSS, x.PeakRSS)
		if x.FloorSeconds > 0 {
			floors = append(floors, x)
		}
		if x.ApplyFloorSeconds > 0 {
			applyFloors = append(applyFloors, x)
		}
	}
	if len(floors) > 0 {
		f := medianBy(floors, func(x *Result) float64 { return x.FloorSeconds })
		r.FloorSeconds, r.FloorControlPlaneCPUSeconds, r.FloorCPUSeconds = f.FloorSeconds, f.FloorControlPlaneCPUSeconds, f.FloorCPUSeconds
	}
	if len(applyFloors) > 0 {
		// The floor from the apply's median round, and where its time went.
		f := medianBy(applyFloors, func(x *Result) float64 { return x.ApplyFloorSeconds })
		r.ApplyFloorSeconds = f.ApplyFloorSeconds
		if f.Breakdown != nil {
			b := *r.breakdown()
			b.ApplyFloor = f.Breakdown.ApplyFloor
			r.Breakdown = &b
		}
	}
}

// medianBy returns the element of xs (not empty) with the median key, the
// lower of the middle two for an even count.
func medianBy(xs []*Result, key func(*Result) float64) *Result {
	sorted := slices.Clone(xs)
	slices.SortStableFunc(sorted, func(a, b *Result) int { return cmp.Compare(key(a), key(b)) })
	return sorted[(len(sorted)-1)/2]
}

// describeRounds lists each round's times and ratio, for the log.
func describeRounds(rounds []Round) string {
	parts := make([]string, len(rounds))
	for i, x := range rounds {
		parts[i] = fmt.Sprintf("oria %.2fs / floor %.2fs = %.2f", x.Oria, x.Floor, ratio(x.Oria, x.Floor))
		if x.ApplyFloor > 0 {
			parts[i] += fmt.Sprintf(" (floor from the apply %.2fs = %.2f)", x.ApplyFloor, ratio(x.Oria, x.ApplyFloor))
		}
	}
	return "rounds: " + strings.Join(parts, "; ")
}
