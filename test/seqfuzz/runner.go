package seqfuzz

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Result is one run of a sequence.
type Result struct {
	Seed uint64
	Seq  Sequence
	// Log has a line per step run: the step and what happened.
	Log        []string
	Violations []Violation
	// Ran is how many steps ran (a run stops at its first violation).
	Ran      int
	Duration time.Duration
}

// Failed reports whether the run found a violation.
func (r *Result) Failed() bool { return len(r.Violations) > 0 }

func (r *Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d of %d steps in %s", r.Seed, r.Ran, len(r.Seq), r.Duration.Round(100*time.Millisecond))
	for _, l := range r.Log {
		b.WriteString("\n    " + l)
	}
	for _, v := range r.Violations {
		b.WriteString("\n  " + v.String())
	}
	return b.String()
}

// runs numbers the runs of this process (part of each run's prefix).
var runs int

// Run runs seq (generated from seed) on a fresh World and judges it at
// every quiet point (after each step, while oria runs, and at the end).
// It stops at the first quiet point with violations.
func Run(ctx context.Context, e *Env, seed uint64, seq Sequence) (*Result, error) {
	runs++
	began := time.Now()
	res := &Result{Seed: seed, Seq: seq}
	if err := e.Oria.Start(ctx); err != nil {
		return nil, err
	}
	prefix := fmt.Sprintf("sf%d-%s", runs, suffix(seed))
	w, err := NewWorld(ctx, e, prefix)
	if err != nil {
		return nil, err
	}
	defer w.Cleanup(context.WithoutCancel(ctx))
	m := NewModel(e.Oria.StartedAt)
	for i, s := range seq {
		out := w.Exec(ctx, s, m)
		res.Ran = i + 1
		res.Log = append(res.Log, fmt.Sprintf("%2d. %s → %s", i+1, s, out))
		if v := w.takeViolations(i + 1); len(v) > 0 {
			res.Violations = v
			break
		}
		if !e.Oria.Running() {
			continue
		}
		v, err := w.Quiet(ctx, m, i+1)
		if err != nil {
			return nil, err
		}
		if len(v) > 0 {
			res.Violations = v
			break
		}
	}
	if !res.Failed() {
		v, err := w.finish(ctx, m, res)
		if err != nil {
			return nil, err
		}
		res.Violations = v
	}
	res.Duration = time.Since(began)
	return res, nil
}

// finishWindow is how far ahead the end of a run still waits for an admin
// grant's window instant.
const finishWindow = 20 * time.Second

// finish is the run's last quiet points: oria runs, and time has passed
// the admin grants' window instants that were close (what a pending grant
// does at notBefore is often the point).
func (w *World) finish(ctx context.Context, m *Model, res *Result) ([]Violation, error) {
	if !w.env.Oria.Running() {
		if err := w.env.Oria.Start(ctx); err != nil {
			return nil, err
		}
		m.OriaStarted = w.env.Oria.StartedAt
		res.Log = append(res.Log, "end: oria started")
	}
	for range 3 {
		v, err := w.Quiet(ctx, m, 0)
		if err != nil || len(v) > 0 {
			return v, err
		}
		d := m.nextEdge(time.Now())
		if !m.edgeAhead(time.Now(), finishWindow) {
			return nil, nil
		}
		time.Sleep(d)
		res.Log = append(res.Log, fmt.Sprintf("end: slept %s, past a window instant", d.Round(100*time.Millisecond)))
	}
	return w.Quiet(ctx, m, 0)
}

// edgeAhead reports whether an admin grant has a window instant within d.
func (m *Model) edgeAhead(now time.Time, d time.Duration) bool {
	for _, t := range m.instants() {
		if t.After(now) && t.Before(now.Add(d)) {
			return true
		}
	}
	return false
}

// instants are the admin grants' window instants and the activations'
// ends.
func (m *Model) instants() []time.Time {
	var out []time.Time
	for _, g := range m.Grants {
		for _, t := range []*time.Time{g.NB, g.EA} {
			if t != nil {
				out = append(out, *t)
			}
		}
	}
	return append(out, m.activationEnds()...)
}

// suffix is a short random tag (runs of one seed never share names).
func suffix(seed uint64) string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	r := rand.New(rand.NewPCG(seed, uint64(time.Now().UnixNano())))
	b := make([]byte, 4)
	for i := range b {
		b[i] = letters[r.IntN(len(letters))]
	}
	return string(b)
}

// Exec runs one step and updates the model with what was admitted; it
// returns what happened, for the log.
func (w *World) Exec(ctx context.Context, s Step, m *Model) string {
	switch s.Op {
	case OpAdminGrant:
		return w.adminGrant(ctx, s, m)
	case OpAdminRevoke:
		return w.adminRevoke(ctx, s, m, false)
	case OpAdminDeleteTemplate:
		return w.adminRevoke(ctx, s, m, true)
	case OpAdminWindow:
		return w.adminWindow(ctx, s, m)
	case OpAdminRecreateNS:
		return w.adminRecreateNS(ctx, s, m)
	case OpAdminRestoreBase:
		return w.adminRestoreBase(ctx, s, m)
	case OpAdminToggleLabel:
		return w.adminToggleLabel(ctx, s, m)
	case OpDGrant:
		return w.dGrant(ctx, s, m)
	case OpDInstanceOf:
		return w.dInstanceOf(ctx, s)
	case OpDWindow:
		return w.dWindow(ctx, s, m)
	case OpDNamespaces:
		return w.dNamespaces(ctx, s, m)
	case OpDDelete:
		return w.dDelete(ctx, s, m)
	case OpDMeta:
		return w.dMeta(ctx, s, m)
	case OpDPolicy:
		return w.dPolicy(ctx, s)
	case OpNBind:
		return w.nBind(ctx, s)
	case OpCAnnotate:
		return w.cAnnotate(ctx, s, m)
	case OpCSquat:
		return w.cSquat(ctx, s, m)
	case OpCLabel:
		return w.cLabel(ctx, s, m)
	case OpSPinUIDs, OpSObservedGen:
		return w.sStatus(ctx, s, m)
	case OpOriaStop:
		w.env.Oria.Stop()
		return "stopped"
	case OpOriaStart:
		if err := w.env.Oria.Start(ctx); err != nil {
			return "start failed: " + err.Error()
		}
		m.OriaStarted = w.env.Oria.StartedAt
		return "ready"
	case OpLeaderChange:
		return w.leaderChange(ctx, m)
	case OpAdminEligible, OpAdminEligibleChange, OpRequest, OpApprove, OpDeny, OpEnd:
		return w.execEligible(ctx, s, m)
	case OpSleep:
		d := m.nextEdge(time.Now())
		time.Sleep(d)
		return fmt.Sprintf("slept %s", d.Round(100*time.Millisecond))
	}
	return "unknown step"
}

// nextEdge is how long until just past the next window instant of an
// admin grant (at most 15 s; 2 s when none is ahead).
func (m *Model) nextEdge(now time.Time) time.Duration {
	best := 15 * time.Second
	found := false
	for _, t := range m.instants() {
		if t.After(now) {
			if d := t.Sub(now) + 1500*time.Millisecond; d < best {
				best, found = d, true
			}
		}
	}
	if !found {
		return 2 * time.Second
	}
	return best
}
