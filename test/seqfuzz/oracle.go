package seqfuzz

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/operator-framework/oria/internal/testutil"
)

// Probe is one right of one subject the oracle asks the API server about
// (a SubjectAccessReview): NS is a namespace key, "" cluster-wide.
type Probe struct {
	Subject string
	Cap     Cap
	NS      string
}

// probes is the fixed probe set: every persona and the victim, every
// probed right, in every namespace of the run and cluster-wide.
func probes() []Probe {
	var out []Probe
	for _, s := range personas {
		for _, ns := range append(append([]string(nil), namespaceKeys...), "") {
			for c := Cap(0); c < numCaps; c++ {
				out = append(out, Probe{Subject: s, Cap: c, NS: ns})
			}
		}
	}
	return out
}

func (p Probe) String() string {
	where := "in " + p.NS
	if p.NS == "" {
		where = "cluster-wide"
	}
	return fmt.Sprintf("%s may %s %s", p.Subject, capNames[p.Cap], where)
}

// Violation is a probe whose answer the model does not allow: an
// escalation (held, and the model says it may not be), or, where the
// model is sure, a missing grant (liveness).
type Violation struct {
	Probe
	Liveness bool
	// Standby: held past its window's end while no replica led (a leader
	// change); Why says which window.
	Standby bool
	// Step is the 1-based step after which it was seen (0: at the end of
	// the run, after time passed the admin grants' close window instants).
	Step int
	Why  string
	// Admitted: the guard admitted a write it must refuse (eligible.go).
	Admitted string
}

func (v Violation) String() string {
	at := fmt.Sprintf("after step %d", v.Step)
	if v.Step == 0 {
		at = "at the end"
	}
	if v.Admitted != "" {
		return fmt.Sprintf("%s: ADMITTED: %s", at, v.Admitted)
	}
	if v.Standby {
		return fmt.Sprintf("%s: STANDBY: %s while no replica led, though %s (the standby replica did not end it)", at, v.Probe, v.Why)
	}
	if v.Liveness {
		return fmt.Sprintf("%s: LIVENESS: %s is denied, though %s grants it", at, v.Probe, v.Why)
	}
	return fmt.Sprintf("%s: ESCALATION: %s, and no admin RBAC, admin grant or delegation allows it", at, v.Probe)
}

// access is the SubjectAccessReview of a probe in world w.
func (w *World) access(p Probe) testutil.Access {
	a := testutil.Access{User: w.Users[p.Subject]}
	if p.NS != "" {
		a.Namespace = w.NS(p.NS)
	}
	switch p.Cap {
	case capDeploy:
		a.Verb, a.Group, a.Resource = "create", "apps", "deployments"
	case capSecrets:
		a.Verb, a.Resource = "get", "secrets"
	case capGadgets:
		a.Verb, a.Group, a.Resource = "create", w.env.Group, w.env.Plural
	}
	return a
}

// askAll asks every probe, in parallel.
func (w *World) askAll(ctx context.Context, ps []Probe) ([]bool, error) {
	out := make([]bool, len(ps))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, p := range ps {
		g.Go(func() error {
			ok, err := testutil.Allowed(ctx, w.env.Admin, w.access(p))
			out[i] = ok
			return err
		})
	}
	return out, g.Wait()
}

// Oracle timing: a quiet point settles, then asks until the answers agree
// with the model, at most escalationWait for an escalation to go away and
// livenessWait for a grant to take effect. Both are generous: make test
// runs this package beside the others on two cores, and a wait costs time
// only when something is wrong.
var (
	settle         = time.Second
	escalationWait = 8 * time.Second
	livenessWait   = 20 * time.Second
)

// Quiet judges the world at a quiet point: it returns the violations that
// outlived their wait.
func (w *World) Quiet(ctx context.Context, m *Model, step int) ([]Violation, error) {
	time.Sleep(settle)
	ps := probes()
	start := time.Now()
	for {
		answers, err := w.askAll(ctx, ps)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		var esc, live []Violation
		for i, p := range ps {
			if may, _ := m.MayHold(p.Subject, p.Cap, p.NS, now); answers[i] && !may {
				esc = append(esc, Violation{Probe: p, Step: step})
			}
			if p.Subject != "V" || answers[i] {
				continue
			}
			if must, why := m.MustHold(p.Cap, p.NS, now); must {
				live = append(live, Violation{Probe: p, Liveness: true, Step: step, Why: why})
			}
		}
		escDone := len(esc) == 0 || now.Sub(start) > escalationWait
		liveDone := len(live) == 0 || now.Sub(start) > livenessWait
		if escDone && liveDone {
			return append(esc, live...), nil
		}
		time.Sleep(250 * time.Millisecond)
	}
}
