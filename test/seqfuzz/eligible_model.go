package seqfuzz

import (
	"slices"
	"time"
)

// Eligible is an admin's eligible RBACPolicy in the model: eligible, not
// granted. It binds nothing by itself; an approved request grants its
// requester (only that user) the policy's access in the requested
// namespaces, for the request's duration.
type Eligible struct {
	Subjects  []string // persona keys eligible (through their groups)
	Approvers bool     // false: self-activation
	Names     []string // namespace keys
	Max       time.Duration
	Caps      []Cap
	// Deleted is when the admin deleted it; Dropped, by namespace key,
	// when the admin narrowed it out.
	Deleted time.Time
	Dropped map[string]time.Time
}

// Request is an admitted AccessRequest in the model.
type Request struct {
	Subject string
	Policy  int
	Names   []string
	Dur     time.Duration
	// Start is when it was approved (or self-activated), zero while
	// pending; Closed when it was denied, cancelled or ended early.
	Start, Closed time.Time
	// Inc: the namespaces' incarnations when it started (a namespace
	// re-created since is another: the model then says only what the
	// grant may do there).
	Inc map[string]int
}

// started records that r started at t.
func (m *Model) started(r *Request, t time.Time) {
	r.Start, r.Inc = t, map[string]int{}
	for _, k := range r.Names {
		r.Inc[k] = m.NS[k].inc
	}
}

// live reports whether policy p still allows namespace key ns at t (as
// the admin wrote it).
func (e *Eligible) live(ns string, t time.Time) bool {
	if !e.Deleted.IsZero() && !t.Before(e.Deleted) {
		return false
	}
	if d, ok := e.Dropped[ns]; ok && !t.Before(d) {
		return false
	}
	return slices.Contains(e.Names, ns)
}

// stop is when request r's grant in ns must be gone by (before grace):
// its end, an early end, the policy's deletion or narrowing.
func (m *Model) stop(r *Request, ns string) time.Time {
	p := m.Eligible[r.Policy]
	stop := r.Start.Add(r.Dur).Add(slack)
	for _, t := range []time.Time{r.Closed, p.Deleted, p.Dropped[ns]} {
		if !t.IsZero() && t.Before(stop) {
			stop = t
		}
	}
	return stop
}

// mayActivate: r may grant its requester c in ns at now.
func (m *Model) mayActivate(r *Request, c Cap, ns string, now time.Time) bool {
	p := m.Eligible[r.Policy]
	if r.Start.IsZero() || ns == "" || !slices.Contains(r.Names, ns) || !slices.Contains(p.Caps, c) {
		return false
	}
	if !p.live(ns, r.Start.Add(-slack)) || now.Before(r.Start.Add(-slack)) {
		return false
	}
	return !now.After(due(m.stop(r, ns), m.OriaStarted).Add(slack))
}

// byActivation says why subject may hold c in ns at now through one of
// its activations ("" if none).
func (m *Model) byActivation(subject string, c Cap, ns string, now time.Time) string {
	for i, r := range m.Requests {
		if r.Subject == subject && m.mayActivate(r, c, ns, now) {
			return requestName(i)
		}
	}
	return ""
}

// delegatedActivation: a delegator (D) held c in ns through an activation
// at some point before now; what she delegated to another subject then may
// outlive it (the guard judges a delegation when it is written). Not to
// herself: her own access ends with the activation.
func (m *Model) delegatedActivation(subject string, c Cap, ns string, now time.Time) string {
	for i, r := range m.Requests {
		if r.Subject == subject || !slices.Contains(delegators, r.Subject) || r.Start.IsZero() || r.Start.After(now) {
			continue
		}
		p := m.Eligible[r.Policy]
		if slices.Contains(r.Names, ns) && slices.Contains(p.Caps, c) && p.live(ns, r.Start.Add(-slack)) {
			return "delegated by " + r.Subject + " through " + requestName(i)
		}
	}
	return ""
}

// mustActivate: V's activation must grant c in ns at now (approved, not
// closed, its policy as it was, well inside its time).
func (m *Model) mustActivate(c Cap, ns string, now time.Time) string {
	for i, r := range m.Requests {
		p := m.Eligible[r.Policy]
		if r.Subject != "V" || r.Start.IsZero() || !r.Closed.IsZero() || ns == "" || !slices.Contains(r.Names, ns) || !slices.Contains(p.Caps, c) {
			continue
		}
		from, to := r.Start.Add(fill), r.Start.Add(r.Dur).Add(-2*time.Second-fill)
		if m.OriaStarted.Add(fill).After(from) {
			from = m.OriaStarted.Add(fill)
		}
		if now.After(from) && now.Before(to) && p.live(ns, r.Start.Add(-slack)) && p.live(ns, now) && r.Inc[ns] == m.NS[ns].inc {
			return requestName(i)
		}
	}
	return ""
}

// activationEnds are the instants at which an activation ends (for the
// sleeps and the end of a run).
func (m *Model) activationEnds() []time.Time {
	var out []time.Time
	for _, r := range m.Requests {
		if !r.Start.IsZero() && r.Closed.IsZero() {
			out = append(out, r.Start.Add(r.Dur))
		}
	}
	return out
}
