package seqfuzz

import (
	"testing"
	"time"
)

// TestModel pins what the oracle's model allows, without a cluster.
func TestModel(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	may := func(m *Model, who string, c Cap, ns string, now time.Time) bool {
		ok, _ := m.MayHold(who, c, ns, now)
		return ok
	}

	m := NewModel(t0.Add(-time.Hour))
	// D is admin of d, N of n; either may pass that on to anyone.
	for _, who := range []string{"D", "V", "C"} {
		if !may(m, who, capSecrets, "d", t0) || !may(m, who, capDeploy, "n", t0) {
			t.Errorf("%s may not hold what D and N may delegate", who)
		}
	}
	if may(m, "D", capGadgets, "d", t0) || may(m, "D", capSecrets, "v1", t0) || may(m, "D", capSecrets, "", t0) {
		t.Error("D may hold more than admin of d")
	}
	// A re-created namespace is a new one: D's RoleBinding is gone with
	// the old one, and so is all that D delegated there.
	m.Recreated("d")
	if may(m, "D", capSecrets, "d", t0) || may(m, "V", capSecrets, "d", t0) {
		t.Error("D's rights outlived the namespace")
	}
	m.RestoreBase("d")
	if !may(m, "D", capSecrets, "d", t0) {
		t.Error("the admin's RoleBinding in the new d does not count")
	}

	// An admin grant to V in v1, pending for 10 s, for 20 s.
	g := &Grant{Caps: roleCaps["extension edit"], Names: []string{"v1"}, NB: at(10 * time.Second), EA: at(30 * time.Second), EndDue: *at(30 * time.Second)}
	m.AddGrant(g)
	for _, c := range []struct {
		now  time.Duration
		ns   string
		want bool
	}{
		{5 * time.Second, "v1", false}, {9500 * time.Millisecond, "v1", true}, {20 * time.Second, "v1", true},
		{20 * time.Second, "v2", false}, {20 * time.Second, "", false}, {33 * time.Second, "v1", true}, {35 * time.Second, "v1", false},
	} {
		if got := may(m, "V", capGadgets, c.ns, t0.Add(c.now)); got != c.want {
			t.Errorf("V gadgets in %q at +%s: %v, want %v", c.ns, c.now, got, c.want)
		}
	}
	if must, _ := m.MustHold(capGadgets, "v1", t0.Add(20*time.Second)); !must {
		t.Error("an untouched grant mid-window is not required")
	}
	// v1 re-created: the grant covered the old v1 only, until the admin
	// writes it again.
	m.Recreated("v1")
	if may(m, "V", capGadgets, "v1", t0.Add(20*time.Second)) {
		t.Error("the grant reaches the new v1")
	}
	if must, _ := m.MustHold(capGadgets, "v1", t0.Add(20*time.Second)); must {
		t.Error("a grant whose namespace was re-created is still required")
	}
	m.SetWindow(g, nil, nil, t0.Add(20*time.Second))
	if !may(m, "V", capGadgets, "v1", t0.Add(time.Hour)) {
		t.Error("the admin's own write does not cover the new v1")
	}
	// A revocation is due within grace, counted from oria's start.
	g.Revoked = t0.Add(time.Hour)
	m.OriaStarted = t0.Add(time.Hour + 10*time.Second)
	if !may(m, "V", capGadgets, "v1", t0.Add(time.Hour+12*time.Second)) || may(m, "V", capGadgets, "v1", t0.Add(time.Hour+14*time.Second)) {
		t.Error("a revocation while oria was down is judged from its start")
	}
}

// TestEdges: the instants of the window edits, as the model reads them.
func TestEdges(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		choice string
		ea     time.Time
	}{
		{"expiresAt zero time", time.Unix(0, 0).UTC()},
		{"expiresAt year 0", time.Unix(0, 0).UTC()},
		{"expiresAt 1s ago", now.Add(-time.Second)},
	} {
		spec, _, ea := edge(c.choice, now, nil, nil)
		if ea == nil || !ea.Equal(c.ea) || spec["expiresAt"] == nil {
			t.Errorf("%s: expiresAt %v (spec %v), want %v", c.choice, ea, spec, c.ea)
		}
	}
	spec, nb, ea := edge("sub-second window", now, nil, nil)
	if nb == nil || ea == nil || ea.Sub(*nb) != 500*time.Millisecond || len(spec) != 2 {
		t.Errorf("sub-second window: %v %v %v", spec, nb, ea)
	}
	if spec, nb, ea := edge("no window", now, at(now), at(now)); nb != nil || ea != nil || len(spec) != 2 {
		t.Errorf("no window: %v %v %v", spec, nb, ea)
	}
}

func at(t time.Time) *time.Time { return &t }
