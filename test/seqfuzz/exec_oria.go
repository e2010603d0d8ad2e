package seqfuzz

import (
	"context"
	"fmt"
	"time"
)

// The leader change (OpLeaderChange): the leading replica is killed just
// before the next window instant of an admin grant (an end first), so
// that the instant passes while no replica leads; until the other replica
// holds the Lease (about 4 s, leaseFlags), the oracle asks every 250 ms
// whether V still holds a right whose every admin grant ended while the
// leader was dead, standbyBound after its expiresAt: that is the standby
// replica's to end (scopeinstance/standby.go). Once the other leads, the
// killed replica starts again as the standby, and the step's quiet point
// judges everything as after any step.

// killEarly is how long before the instant the leader is killed (its own
// timer for it is due at the instant).
const killEarly = 200 * time.Millisecond

// aimAhead is how far ahead a leader change still waits for an instant.
const aimAhead = 15 * time.Second

// standbyBound is how soon after expiresAt a window's access must end while
// no replica leads: the standby looks StandbyGrace (0.3 s) after it; the
// rest is the oracle's slack on a loaded machine (test/e2e's
// TestExpiryWhileLeaderKilledStandbyRevokes measures 1 s). It stays well
// below the takeover, so that the check is made at all: the Lease (4 s)
// outlives the killed leader's last renewal (at most 0.5 s before the
// kill, which is 0.2 s before the instant), so no replica leads until 3.3 s
// after the instant at the earliest.
const standbyBound = 2500 * time.Millisecond

func (w *World) leaderChange(ctx context.Context, m *Model) string {
	if !w.env.Oria.Running() { // no leader to kill: the sleep it may stand for
		d := m.nextEdge(time.Now())
		time.Sleep(d)
		return fmt.Sprintf("oria is down: slept %s", d.Round(100*time.Millisecond))
	}
	aim := "now"
	if at, what, ok := m.nextInstant(time.Now(), aimAhead); ok {
		time.Sleep(time.Until(at.Add(-killEarly)))
		aim = fmt.Sprintf("%s before %s", killEarly, what)
	}
	killed := time.Now()
	checks, seen := 0, 0
	out, err := w.env.Oria.LeaderChange(ctx, func() {
		n, v := w.standbyCheck(ctx, m, killed)
		checks += n
		if len(v) > 0 && len(w.stepViolations) == 0 {
			w.stepViolations, seen = v, len(v)
		}
	})
	if err != nil {
		return "leader change failed: " + err.Error()
	}
	out = fmt.Sprintf("%s, %s; %d standby checks", aim, out, checks)
	if seen > 0 {
		out += fmt.Sprintf(", %d rights held past their window while no replica led", seen)
	}
	return out
}

// standbyCheck asks V's probes once; it returns how many it judged (those
// whose grants all ended while no replica led, standbyBound ago) and
// those still allowed.
func (w *World) standbyCheck(ctx context.Context, m *Model, killed time.Time) (int, []Violation) {
	now := time.Now()
	var ps []Probe
	var whys []string
	for _, p := range probes() {
		if p.Subject != "V" {
			continue
		}
		if ended, why := m.windowEnded(p.Cap, p.NS, killed, now); ended {
			ps, whys = append(ps, p), append(whys, why)
		}
	}
	if len(ps) == 0 {
		return 0, nil
	}
	answers, err := w.askAll(ctx, ps)
	if err != nil {
		return 0, nil // asked again in 250 ms
	}
	var v []Violation
	for i, p := range ps {
		if answers[i] {
			v = append(v, Violation{Probe: p, Standby: true, Why: whys[i]})
		}
	}
	return len(ps), v
}

// nextInstant is the next window instant of an admin grant within d of
// now: the next expiresAt if there is one, else the next notBefore.
func (m *Model) nextInstant(now time.Time, d time.Duration) (time.Time, string, bool) {
	var at time.Time
	what := ""
	for _, end := range []bool{true, false} {
		for i, g := range m.Grants {
			t := g.NB
			if end {
				t = g.EA
			}
			if t != nil && t.After(now.Add(killEarly)) && t.Before(now.Add(d)) && (at.IsZero() || t.Before(at)) {
				at, what = *t, fmt.Sprintf("%s's %s", grantName(i), map[bool]string{true: "expiresAt", false: "notBefore"}[end])
			}
		}
		if !at.IsZero() {
			return at, what, true
		}
	}
	return at, what, false
}

// windowEnded reports whether V may not hold c in ns now because every
// admin grant that may have given it when the leader was killed has
// reached the end of its window since, standbyBound ago (its expiresAt as
// the admin wrote it, after the kill, nothing else ending it), and one
// did: what a standby must have ended. The model's usual grace after an
// end (MayHold) does not apply: that is the leader's.
func (m *Model) windowEnded(c Cap, ns string, killed, now time.Time) (bool, string) {
	for _, p := range delegators {
		if m.byBase(p, c, ns) != "" {
			return false, ""
		}
	}
	why := ""
	for i, g := range m.Grants {
		if !m.mayGrant(g, c, ns, killed) {
			if m.mayGrant(g, c, ns, now) {
				return false, ""
			}
			continue
		}
		if g.EA == nil || !g.EA.After(killed) || !g.EndDue.Equal(*g.EA) || !g.Revoked.IsZero() || now.Before(g.EA.Add(standbyBound)) {
			return false, ""
		}
		why = fmt.Sprintf("%s's expiresAt passed %s ago", grantName(i), now.Sub(*g.EA).Round(100*time.Millisecond))
	}
	return why != "", why
}
