package cli

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/ownership"
	policymodel "github.com/operator-framework/oria/internal/policy"
)

// States of a time-bound grant's window, as the reports write them (the
// labels of the metric oria_time_bound_grants).
const (
	WindowPending = "pending"
	WindowActive  = "active"
	WindowExpired = "expired"
)

// GrantWindow is the window of a time-bound grant (spec.notBefore,
// spec.expiresAt) as a report shows it, judged at the report's time.
type GrantWindow struct {
	NotBefore *metav1.Time `json:"notBefore,omitempty"`
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
	// State is pending (before notBefore), active or expired (from
	// expiresAt on).
	State string `json:"state"`
	// TimeLeft is how long until the window opens (pending) or ends
	// (active, with an end): "5h", "12m", "40s"; empty otherwise.
	TimeLeft string `json:"timeLeft,omitempty"`
	// Description says it in words: "until 2025-06-06T18:00:00Z (5h
	// left)", "from ... (in 3h) until ...", "expired at ...".
	Description string `json:"description"`
}

// windowOf is w at now as a report shows it; nil for a grant without a
// window. The bounds are read in whole seconds, as oria reads them.
func windowOf(w binding.Window, now time.Time) *GrantWindow {
	if !w.Bounded() {
		return nil
	}
	w = w.Whole()
	out := &GrantWindow{NotBefore: w.NotBefore, ExpiresAt: w.ExpiresAt, Description: describeWindow(w, now)}
	switch phase, next := w.At(now); phase {
	case binding.WindowPending:
		out.State, out.TimeLeft = WindowPending, binding.Left(w.NotBefore.Sub(now))
	case binding.WindowExpired:
		out.State = WindowExpired
	default:
		out.State = WindowActive
		if w.ExpiresAt != nil {
			out.TimeLeft = binding.Left(next)
		} else {
			out.Description = fmt.Sprintf("from %s, with no end", binding.Stamp(w.NotBefore))
		}
	}
	return out
}

// describeWindow says when w grants, as kubectl oria prints it: the
// instants of binding.Window.Describe (what status messages say), with how
// long is left computed now, when it prints ("until
// 2025-06-06T18:00:00Z (5h left)", "from ... (in 3h) until ...").
func describeWindow(w binding.Window, now time.Time) string {
	switch phase, _ := w.At(now); {
	case phase == binding.WindowPending && w.ExpiresAt != nil:
		return fmt.Sprintf("from %s (in %s) until %s", binding.Stamp(w.NotBefore), binding.Left(w.NotBefore.Sub(now)), binding.Stamp(w.ExpiresAt))
	case phase == binding.WindowPending:
		return fmt.Sprintf("from %s (in %s), with no end", binding.Stamp(w.NotBefore), binding.Left(w.NotBefore.Sub(now)))
	case phase == binding.WindowOpen && w.ExpiresAt != nil:
		return fmt.Sprintf("until %s (%s left)", binding.Stamp(w.ExpiresAt), binding.Left(w.ExpiresAt.Sub(now)))
	}
	return w.Describe(now)
}

// String is the window for a table cell ("" without one).
func (w *GrantWindow) String() string {
	if w == nil {
		return ""
	}
	return w.Description
}

// viaNote is what the via of a binding of a time-bound grant adds: when
// the access it gives ends, or that it is still in place out of its window
// (oria not running, or not there yet): the report hides nothing in force.
func viaNote(w *GrantWindow) string {
	switch {
	case w == nil:
		return ""
	case w.State == WindowExpired:
		return " (" + w.Description + ": oria has not deleted its bindings yet)"
	case w.State == WindowPending:
		return " (pending, " + w.Description + ": oria has not deleted its bindings yet)"
	case w.ExpiresAt == nil:
		return ""
	}
	return " (" + w.Description + ")"
}

// pendingGrants returns the grants whose window has not opened yet (the
// RBACPolicies, not the instances they compile into, and ScopeInstances
// of their own).
func pendingGrants(grants []Grant) []Grant {
	var out []Grant
	policies := map[string]bool{}
	for _, g := range grants {
		if g.Window == nil || g.Window.State != WindowPending {
			continue
		}
		if g.Kind == "RBACPolicy" {
			policies[policymodel.ObjectName(g.Name)] = true
		} else if policies[g.Name] {
			continue
		}
		out = append(out, g)
	}
	return out
}

// PendingNote is what access prints after its table: the grants that
// grant nothing yet, and from when they will.
func PendingNote(pending []Grant) string {
	if len(pending) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nPending (not in force yet, so not listed above):\n")
	for _, g := range pending {
		fmt.Fprintf(&b, "  %s %s: %s for %s, %s\n", g.Kind, g.Name, cmp.Or(g.Access, "access"), cmp.Or(strings.Join(g.Subjects, ", "), "no subject"), g.Window.Description)
	}
	return b.String()
}

// inWindow reports whether the instance's window is open at the plan's
// time, with a note for a time-bound one: when it ends, or, outside its
// window, that it grants nothing now (what a pending one will bind is
// summarized all the same).
func (p *planner) inWindow(si *oriav1alpha1.ScopeInstance) bool {
	win := binding.InstanceWindow(si.Spec)
	w := windowOf(win, p.st.Now)
	if w == nil {
		return true
	}
	who := "ScopeInstance " + si.Name
	if policy := ownership.ControllerName(si.OwnerReferences, ownership.KindRBACPolicy); policy != "" {
		who = "RBACPolicy " + policy
	}
	if p.emptyWindow(who, win) {
		return false
	}
	switch w.State {
	case WindowPending:
		p.note("%s is time-bound and pending, %s: it grants nothing before spec.notBefore, so no binding is created now; "+
			"from then on, oria binds what its ScopeTemplate says", who, w.Description)
		if t := p.templates[si.Spec.ScopeTemplateName]; t != nil {
			p.summarize(t, si.Name)
		}
		return false
	case WindowExpired:
		p.note("%s %s (spec.expiresAt): it grants nothing, and has no bindings", who, w.Description)
		return false
	}
	if w.ExpiresAt != nil {
		p.note("%s is time-bound: it grants %s; oria deletes its bindings then", who, w.Description)
	}
	return true
}
