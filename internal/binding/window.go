package binding

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// Window is the time a ScopeInstance (or an RBACPolicy, which its compiled
// instance carries) grants in: from NotBefore, inclusive, until ExpiresAt,
// exclusive. A nil bound is open on that side; the zero Window is "always".
// Everything here is pure: the time is always passed in, never read.
type Window struct {
	NotBefore *metav1.Time
	ExpiresAt *metav1.Time
}

// InstanceWindow returns the window of an instance spec.
func InstanceWindow(spec oriav1alpha1.ScopeInstanceSpec) Window {
	return Window{NotBefore: spec.NotBefore, ExpiresAt: spec.ExpiresAt}
}

// PolicyWindow returns the window of a policy spec.
func PolicyWindow(spec oriav1alpha1.RBACPolicySpec) Window {
	return Window{NotBefore: spec.NotBefore, ExpiresAt: spec.ExpiresAt}
}

// Phase is where an instant lies relative to a window.
type Phase int

const (
	// WindowOpen: the object grants what it grants (also: no window).
	WindowOpen Phase = iota
	// WindowPending: before notBefore; the object grants nothing yet.
	WindowPending
	// WindowExpired: at or after expiresAt; the object grants nothing, for
	// good (unless its spec changes).
	WindowExpired
)

// String names the phase as the Ready reason does (Bound for open).
func (p Phase) String() string {
	switch p {
	case WindowPending:
		return oriav1alpha1.ReasonPending
	case WindowExpired:
		return oriav1alpha1.ReasonExpired
	}
	return oriav1alpha1.ReasonBound
}

// Bounded reports whether the window has a bound at all (a time-bound
// grant).
func (w Window) Bounded() bool { return w.NotBefore != nil || w.ExpiresAt != nil }

// At returns the phase of now and how long until the next boundary after
// now changes it (0 when none will: no bound ahead, or expired). Expiry
// wins: a window whose expiresAt is not after its notBefore (which the API
// server refuses) is expired from expiresAt on, and pending before.
func (w Window) At(now time.Time) (Phase, time.Duration) {
	if w.ExpiresAt != nil && !now.Before(w.ExpiresAt.Time) {
		return WindowExpired, 0
	}
	if w.NotBefore != nil && now.Before(w.NotBefore.Time) {
		next := w.NotBefore.Sub(now)
		if w.ExpiresAt != nil {
			next = min(next, w.ExpiresAt.Sub(now))
		}
		return WindowPending, next
	}
	if w.ExpiresAt != nil {
		return WindowOpen, w.ExpiresAt.Sub(now)
	}
	return WindowOpen, 0
}

// Widens reports whether w grants at some instant that old does not, both
// judged as compiled (Whole: whole seconds, notBefore rounded up, expiresAt
// down, clamped to the instants oria accepts) and compared as instants:
// its notBefore is earlier than old's (or removed), or its expiresAt later
// (or removed). Such a change is a grant, checked as any other; one that
// does not widen (the same compiled window, or a narrower one) only takes
// away. A bound of w outside [EarliestInstant, LatestInstant] that old does
// not have is never a narrowing (the API server refuses it; the zero time
// is not "earlier", whatever it compiles to).
func (w Window) Widens(old Window) bool {
	if strayBound(w.NotBefore, old.NotBefore) || strayBound(w.ExpiresAt, old.ExpiresAt) {
		return true
	}
	w, old = w.Whole(), old.Whole()
	earlier := old.NotBefore != nil && (w.NotBefore == nil || w.NotBefore.Before(old.NotBefore))
	later := old.ExpiresAt != nil && (w.ExpiresAt == nil || old.ExpiresAt.Before(w.ExpiresAt))
	return earlier || later
}

// strayBound reports whether b is a bound outside the instants oria
// accepts that old is not (the same stray bound, unchanged, is no change).
func strayBound(b, old *metav1.Time) bool {
	if b == nil || !OutOfRange(b.Time) {
		return false
	}
	return old == nil || !old.Equal(b)
}

// OutOfRange reports whether t lies outside [EarliestInstant,
// LatestInstant], the instants oria accepts for a window's bound.
func OutOfRange(t time.Time) bool {
	return t.Before(oriav1alpha1.EarliestInstant) || t.After(oriav1alpha1.LatestInstant)
}

// Empty reports whether w, as compiled (Whole), never opens: both bounds
// set and expiresAt not after notBefore once in whole seconds (a window
// inside one second, such as S.200 to S.800, or one inverted by the
// rounding). The API server refuses such a window; one stored before it
// did grants nothing: it is Pending until its expiresAt, then Expired
// (At).
func (w Window) Empty() bool {
	c := w.Whole()
	return c.NotBefore != nil && c.ExpiresAt != nil && !c.ExpiresAt.After(c.NotBefore.Time)
}

// Intersect returns the window within both a and b: the later notBefore and
// the earlier expiresAt.
func Intersect(a, b Window) Window {
	out := Window{NotBefore: a.NotBefore, ExpiresAt: a.ExpiresAt}
	if b.NotBefore != nil && (out.NotBefore == nil || out.NotBefore.Before(b.NotBefore)) {
		out.NotBefore = b.NotBefore
	}
	if b.ExpiresAt != nil && (out.ExpiresAt == nil || b.ExpiresAt.Before(out.ExpiresAt)) {
		out.ExpiresAt = b.ExpiresAt
	}
	return out.DeepCopy()
}

// Whole returns w in whole seconds, as the API stores a metav1.Time it
// writes (RFC 3339 without a fraction), never wider than w: notBefore
// rounded up, expiresAt down. A policy's window compiled into its instance
// then reads back exactly as written (no rewrite at every reconcile), and
// never starts earlier or ends later than the policy's; a bound stays a
// bound, clamped to the instants that round-trip (oriav1alpha1.WholeSecond).
func (w Window) Whole() Window {
	return Window{
		NotBefore: oriav1alpha1.WholeSecond(w.NotBefore, true),
		ExpiresAt: oriav1alpha1.WholeSecond(w.ExpiresAt, false),
	}
}

// DeepCopy returns a window whose bounds w does not share.
func (w Window) DeepCopy() Window {
	return Window{NotBefore: w.NotBefore.DeepCopy(), ExpiresAt: w.ExpiresAt.DeepCopy()}
}

// Stamp returns t as the API writes it (RFC 3339, UTC), for messages.
func Stamp(t *metav1.Time) string { return t.UTC().Format(time.RFC3339) }

// Left says how long d is, for a message: whole days, hours, minutes or
// seconds, the largest unit that fits ("3d", "5h", "12m", "40s").
// Rounding down to that unit keeps a message that states it stable while
// the unit does not change, so a reconcile in between writes nothing new.
func Left(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	case d >= 2*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	case d >= 2*time.Minute:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d > 0:
		return fmt.Sprintf("%ds", int(d/time.Second))
	}
	return "0s"
}

// Describe says when w grants, for a status message, in instants only
// (a message never holds a duration, which would go stale and cause a write
// as time passes; kubectl oria says how long is left when it prints):
// "until 2025-06-06T18:00:00Z", "from ... until ...", "expired at ...",
// "" for a window without bounds. now only decides the phase.
func (w Window) Describe(now time.Time) string {
	switch phase, _ := w.At(now); {
	case phase == WindowExpired:
		return fmt.Sprintf("expired at %s", Stamp(w.ExpiresAt))
	case phase == WindowPending && w.ExpiresAt != nil:
		return fmt.Sprintf("from %s until %s", Stamp(w.NotBefore), Stamp(w.ExpiresAt))
	case phase == WindowPending:
		return fmt.Sprintf("from %s, with no end", Stamp(w.NotBefore))
	case w.ExpiresAt != nil:
		return fmt.Sprintf("until %s", Stamp(w.ExpiresAt))
	}
	return ""
}
