package authz

import (
	"fmt"
	"strings"

	"github.com/operator-framework/oria/internal/binding"
)

// Denial is one thing the user may not do.
type Denial struct {
	// Verb is "bind" (a grant) or "escalate" (an inline role).
	Verb string
	// Grant is the refused binding; for "escalate", Grant.Role is the role
	// and Namespace is "".
	Grant binding.Grant
	// Missing are permissions of the role the user does not hold (at most
	// MaxMissing).
	Missing []Permission
	// Absent is true when the role does not exist: only "bind" can allow
	// binding it.
	Absent bool
	// InlineOf names the ScopeTemplate whose inline role Grant.Role is, when
	// it is not the template being checked: oria rewrites that role when its
	// template changes, so only "bind" can allow binding it.
	InlineOf string
	// TooLarge is true when the role grants more than MaxPermissions.
	TooLarge bool
	// More is true when the search for missing permissions stopped at
	// MaxMissing: there may be others.
	More bool
}

// Message says what is missing, in the style of the API server's own
// refusal of an escalating binding.
func (d Denial) Message(user string) string {
	g := d.Grant
	var b strings.Builder
	if d.Verb == "escalate" {
		fmt.Fprintf(&b, "user %q may not create ClusterRole %q with these rules: needs %q on clusterroles/%s, or every permission it grants cluster-wide", user, g.Role, "escalate", g.Role)
	} else {
		fmt.Fprintf(&b, "user %q may not bind ClusterRole %q %s: needs %q on clusterroles/%s %s", user, g.Role, g.Where(), "bind", g.Role, ScopeWord(g))
		if !d.Absent && d.InlineOf == "" {
			b.WriteString(", or every permission it grants")
		}
	}
	switch {
	case d.Absent:
		b.WriteString(" (the ClusterRole does not exist yet, so only \"bind\" allows binding it)")
	case d.InlineOf != "":
		fmt.Fprintf(&b, " (it is ScopeTemplate %q's inline role, which oria rewrites whenever that template changes, so only \"bind\" allows binding it elsewhere: inline the rules instead)", d.InlineOf)
	case d.TooLarge:
		b.WriteString(" (it grants too many permissions to check one by one)")
	case len(d.Missing) > 0:
		missing := make([]string, len(d.Missing))
		for i, p := range d.Missing {
			missing[i] = p.String()
		}
		fmt.Fprintf(&b, " (missing: %s", strings.Join(missing, ", "))
		if d.More {
			b.WriteString(", ...")
		}
		b.WriteString(")")
	}
	return b.String()
}

// ScopeWord is where a grant binds, for a message: "cluster-wide" or "there".
func ScopeWord(g binding.Grant) string {
	if g.ClusterWide() {
		return "cluster-wide"
	}
	return "there"
}
