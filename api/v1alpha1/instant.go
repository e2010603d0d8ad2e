package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The instants oria accepts for notBefore and expiresAt, inclusive: from the
// Unix epoch to the last whole second of the year 9999, in UTC. Every one of
// them encodes (RFC 3339, as metav1.Time writes it) to a string that decodes
// to itself; outside, the zero time encodes as null ("no bound") and a year
// before 0 or after 9999 in UTC does not decode at all. The CRDs' rules
// refuse anything outside (see the XValidation rules on the specs), and
// ClampInstant keeps a value that got in anyway from ever reading as "no
// bound".
var (
	EarliestInstant = time.Unix(0, 0).UTC()
	LatestInstant   = time.Date(9999, time.December, 31, 23, 59, 59, 0, time.UTC)
)

// WholeSecond returns t in whole seconds and UTC, never wider than t: a
// start (up) rounded up, an end rounded down, then clamped to
// [EarliestInstant, LatestInstant]. Clamping changes no decision between
// 1970 and 9999: a start or an end before 1970 is in the past either way,
// one after 9999 in the future. nil stays nil (no bound); a bound, even the
// zero time, stays a bound.
func WholeSecond(t *metav1.Time, up bool) *metav1.Time {
	if t == nil {
		return nil
	}
	w := t.Truncate(time.Second)
	if up && w.Before(t.Time) {
		w = w.Add(time.Second)
	}
	return &metav1.Time{Time: ClampInstant(w)}
}

// ClampInstant returns t in UTC within [EarliestInstant, LatestInstant].
func ClampInstant(t time.Time) time.Time {
	switch {
	case t.Before(EarliestInstant):
		return EarliestInstant
	case t.After(LatestInstant):
		return LatestInstant
	}
	return t.UTC()
}
