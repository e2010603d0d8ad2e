package seqfuzz

import (
	"fmt"
	"slices"
	"time"
)

// Cap is one right the oracle probes.
type Cap int

const (
	capDeploy  Cap = iota // create deployments.apps
	capSecrets            // get secrets
	capGadgets            // create the extension's gadgets
	numCaps
)

var capNames = [numCaps]string{"create deployments", "get secrets", "create gadgets"}

// roleCaps are the probed rights each role the steps bind gives.
var roleCaps = map[string][]Cap{
	"admin":                     {capDeploy, capSecrets}, // FineGrained: no gadgets aggregated into admin
	"edit":                      {capDeploy, capSecrets},
	"view":                      nil,
	"inline get secrets":        {capSecrets},
	"inline create deployments": {capDeploy},
	"extension edit":            {capGadgets},
	"extension admin":           {capGadgets},
	"extension view":            nil,
}

// Timing of the oracle.
const (
	// grace is how long after it is due a right may still be held (the
	// issue: "gone within a few seconds"); the oracle re-asks for a few
	// more seconds on top.
	grace = 3 * time.Second
	// slack is the uncertainty of an instant as compiled (whole seconds).
	slack = time.Second
	// fill is how long after it starts an admin grant must take effect.
	fill = 2 * time.Second
)

// nsState is one namespace of a run, by key (d, n, v1, v2).
type nsState struct {
	inc          int // incarnation: +1 on every delete and create
	labelled     bool
	unlabelledAt time.Time
}

// Grant is what an admin granted the victim V: the model's intent, from
// the admin's own writes only.
type Grant struct {
	Policy   bool
	Caps     []Cap
	Names    []string // namespace keys, when listed
	Selector bool
	Cluster  bool
	// Pins are the incarnations of each listed namespace the admin's
	// writes covered: a namespace deleted and created again is another.
	Pins map[string][]int
	// NB and EA are the window as the admin wrote it (nil: unbounded);
	// EndDue is when the end became due (EA, or the write that put EA in
	// the past); Revoked is when the admin deleted the grant or its
	// template.
	NB, EA          *time.Time
	EndDue, Revoked time.Time
	// Tampered: a persona wrote to it (or to what it binds, or its
	// namespaces changed): the model then says only what it may grant,
	// not what it must.
	Tampered bool
}

// Model is what the admins intended, and the base RBAC of the personas.
type Model struct {
	NS map[string]*nsState
	// Base: persona → namespace key → the incarnation in which the admin
	// made the persona admin (D of d, N of n).
	Base   map[string]map[string]int
	Grants []*Grant
	// Eligible and Requests: eligible access (eligible_model.go).
	Eligible []*Eligible
	Requests []*Request
	// OriaStarted is when oria last started: nothing is revoked while it
	// is down, so a due revocation is judged from its start.
	OriaStarted time.Time
}

// NewModel is the world at the start of a run.
func NewModel(now time.Time) *Model {
	m := &Model{NS: map[string]*nsState{}, OriaStarted: now,
		Base: map[string]map[string]int{"D": {"d": 0}, "N": {"n": 0}}}
	for _, k := range namespaceKeys {
		m.NS[k] = &nsState{labelled: k == "v1" || k == "v2"}
	}
	return m
}

// delegators are the personas who may pass on what they hold (D through
// oria, N through RoleBindings in its namespace).
var delegators = []string{"D", "N"}

func due(at, started time.Time) time.Time {
	if started.After(at) {
		at = started
	}
	return at.Add(grace)
}

// MayHold reports whether subject may hold c in namespace key ns ("" is
// cluster-wide) at now: the upper bound of the oracle.
func (m *Model) MayHold(subject string, c Cap, ns string, now time.Time) (bool, string) {
	if why := m.byBase(subject, c, ns); why != "" {
		return true, why
	}
	if subject == "V" {
		for i, g := range m.Grants {
			if m.mayGrant(g, c, ns, now) {
				return true, grantName(i)
			}
		}
	}
	if why := m.byActivation(subject, c, ns, now); why != "" {
		return true, why
	}
	for _, p := range delegators {
		if why := m.byBase(p, c, ns); why != "" {
			return true, "delegated by " + why
		}
	}
	if why := m.delegatedActivation(subject, c, ns, now); why != "" {
		return true, why
	}
	return false, ""
}

func (m *Model) byBase(subject string, c Cap, ns string) string {
	inc, ok := m.Base[subject][ns]
	if ok && ns != "" && inc == m.NS[ns].inc && slices.Contains(roleCaps["admin"], c) {
		return subject + " admin of " + ns
	}
	return ""
}

func (m *Model) mayGrant(g *Grant, c Cap, ns string, now time.Time) bool {
	if !slices.Contains(g.Caps, c) {
		return false
	}
	if !g.Revoked.IsZero() && now.After(due(g.Revoked, m.OriaStarted)) {
		return false
	}
	if g.NB != nil && now.Before(g.NB.Add(-slack)) {
		return false
	}
	if g.EA != nil && now.After(due(g.EndDue, m.OriaStarted).Add(slack)) {
		return false
	}
	switch {
	case g.Cluster:
		return true
	case ns == "":
		return false
	case g.Selector:
		st := m.NS[ns]
		return st.labelled || now.Before(due(st.unlabelledAt, m.OriaStarted))
	default:
		return slices.Contains(g.Pins[ns], m.NS[ns].inc)
	}
}

// MustHold reports whether V must hold c in ns at now through an admin
// grant nobody tampered with (the liveness side of the oracle, checked
// where it is cheap).
func (m *Model) MustHold(c Cap, ns string, now time.Time) (bool, string) {
	if now.Before(m.OriaStarted.Add(fill)) {
		return false, ""
	}
	for i, g := range m.Grants {
		if g.Tampered || !g.Revoked.IsZero() || !slices.Contains(g.Caps, c) {
			continue
		}
		if g.NB != nil && now.Before(g.NB.Add(fill)) || g.EA != nil && now.After(g.EA.Add(-fill)) {
			continue
		}
		if g.EA != nil && g.NB != nil && !g.EA.After(*g.NB) {
			continue
		}
		covered := g.Cluster || ns != "" && (g.Selector && m.NS[ns].labelled ||
			len(g.Pins[ns]) == 1 && g.Pins[ns][0] == m.NS[ns].inc)
		if covered {
			return true, grantName(i)
		}
	}
	if why := m.mustActivate(c, ns, now); why != "" {
		return true, why
	}
	return false, ""
}

func grantName(i int) string { return fmt.Sprintf("grant#%d", i) }

// AddGrant records an admitted admin grant (pins: the listed namespaces'
// current incarnations).
func (m *Model) AddGrant(g *Grant) {
	g.Pins = map[string][]int{}
	for _, k := range g.Names {
		g.Pins[k] = []int{m.NS[k].inc}
	}
	m.Grants = append(m.Grants, g)
}

// SetWindow records an admitted admin write of a grant's window at now. An
// admin's write may pin again (the model allows the namespaces' current
// incarnations too).
func (m *Model) SetWindow(g *Grant, nb, ea *time.Time, now time.Time) {
	g.NB, g.EA = nb, ea
	g.EndDue = now
	if ea != nil && ea.After(now) {
		g.EndDue = *ea
	}
	for _, k := range g.Names {
		if !slices.Contains(g.Pins[k], m.NS[k].inc) {
			g.Pins[k] = append(g.Pins[k], m.NS[k].inc)
		}
	}
}

// Recreated records that the admin deleted namespace key and created it
// again: a new namespace, without the RoleBindings of the old one.
func (m *Model) Recreated(key string) {
	m.NS[key].inc++
	m.touchNamespace(key)
}

// Relabelled records a toggle of the victims' selector label on key.
func (m *Model) Relabelled(key string, now time.Time) {
	st := m.NS[key]
	st.labelled = !st.labelled
	if !st.labelled {
		st.unlabelledAt = now
	}
	m.touchNamespace(key)
}

func (m *Model) touchNamespace(key string) {
	for _, g := range m.Grants {
		if g.Selector || slices.Contains(g.Names, key) {
			g.Tampered = true
		}
	}
}

// RestoreBase records that the admin made the persona of key admin there
// again (in its current incarnation).
func (m *Model) RestoreBase(key string) {
	for p, b := range m.Base {
		if _, ok := b[key]; ok {
			m.Base[p][key] = m.NS[key].inc
		}
	}
}
