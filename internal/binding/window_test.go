package binding

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

var t0 = time.Date(2025, 6, 6, 12, 0, 0, 0, time.UTC)

// at returns t0 moved by d, as a bound.
func at(d time.Duration) *metav1.Time { return &metav1.Time{Time: t0.Add(d)} }

func TestWindowAt(t *testing.T) {
	type want struct {
		Phase Phase
		Next  time.Duration
	}
	for _, tc := range []struct {
		name string
		w    Window
		now  time.Duration
		want want
	}{
		{"no window: open for good", Window{}, 0, want{WindowOpen, 0}},
		{"before notBefore: pending until it", Window{NotBefore: at(time.Hour)}, 0, want{WindowPending, time.Hour}},
		{"at notBefore: open (inclusive)", Window{NotBefore: at(0)}, 0, want{WindowOpen, 0}},
		{"open with an end: next is the end", Window{NotBefore: at(-time.Hour), ExpiresAt: at(time.Minute)}, 0, want{WindowOpen, time.Minute}},
		{"at expiresAt: expired (exclusive)", Window{ExpiresAt: at(0)}, 0, want{WindowExpired, 0}},
		{"after expiresAt: expired, nothing ahead", Window{NotBefore: at(-2 * time.Hour), ExpiresAt: at(-time.Hour)}, 0, want{WindowExpired, 0}},
		{"pending with an end: next is the start", Window{NotBefore: at(time.Minute), ExpiresAt: at(time.Hour)}, 0, want{WindowPending, time.Minute}},
		{"an empty window (refused by the schema) is pending, then expired at its end", Window{NotBefore: at(time.Hour), ExpiresAt: at(time.Minute)}, 0,
			want{WindowPending, time.Minute}},
		{"an empty window past its end: expiry wins", Window{NotBefore: at(time.Hour), ExpiresAt: at(time.Minute)}, 2 * time.Minute, want{WindowExpired, 0}},
		{"a nanosecond before the end: still open", Window{ExpiresAt: at(0)}, -time.Nanosecond, want{WindowOpen, time.Nanosecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			phase, next := tc.w.At(t0.Add(tc.now))
			if d := cmp.Diff(tc.want, want{phase, next}); d != "" {
				t.Errorf("At (-want +got):\n%s", d)
			}
		})
	}
}

func TestWindowWidens(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new Window
		want     bool
	}{
		{"same", Window{NotBefore: at(0), ExpiresAt: at(time.Hour)}, Window{NotBefore: at(0), ExpiresAt: at(time.Hour)}, false},
		{"none to none", Window{}, Window{}, false},
		{"expiresAt later", Window{ExpiresAt: at(time.Hour)}, Window{ExpiresAt: at(2 * time.Hour)}, true},
		{"expiresAt removed", Window{ExpiresAt: at(time.Hour)}, Window{}, true},
		{"notBefore earlier", Window{NotBefore: at(time.Hour)}, Window{NotBefore: at(time.Minute)}, true},
		{"notBefore removed", Window{NotBefore: at(time.Hour)}, Window{}, true},
		{"expiresAt earlier", Window{ExpiresAt: at(time.Hour)}, Window{ExpiresAt: at(time.Minute)}, false},
		{"expiresAt added", Window{}, Window{ExpiresAt: at(time.Minute)}, false},
		{"notBefore later", Window{NotBefore: at(time.Minute)}, Window{NotBefore: at(time.Hour)}, false},
		{"notBefore added", Window{}, Window{NotBefore: at(time.Hour)}, false},
		{"both narrowed", Window{NotBefore: at(0), ExpiresAt: at(time.Hour)}, Window{NotBefore: at(time.Minute), ExpiresAt: at(time.Minute * 30)}, false},
		{"moved later as a whole: the end widens", Window{NotBefore: at(0), ExpiresAt: at(time.Hour)}, Window{NotBefore: at(time.Hour), ExpiresAt: at(2 * time.Hour)}, true},
		{"moved earlier as a whole: the start widens", Window{NotBefore: at(time.Hour), ExpiresAt: at(2 * time.Hour)}, Window{NotBefore: at(0), ExpiresAt: at(time.Hour)}, true},
		{"an expired grant extended", Window{ExpiresAt: at(-time.Hour)}, Window{ExpiresAt: at(time.Hour)}, true},
		// As compiled (whole seconds), compared as instants (issue 40).
		{"expiresAt a fraction later, the same second: no change", Window{ExpiresAt: at(time.Hour)}, Window{ExpiresAt: at(time.Hour + 900*time.Millisecond)}, false},
		{"notBefore a fraction earlier, the same compiled second: no change", Window{NotBefore: at(time.Second)}, Window{NotBefore: at(100 * time.Millisecond)}, false},
		{"notBefore a fraction earlier, rounded up to the same second: no change", Window{NotBefore: at(0)}, Window{NotBefore: at(-100 * time.Millisecond)}, false},
		{"notBefore into the second before, once rounded: widens", Window{NotBefore: at(0)}, Window{NotBefore: at(-1100 * time.Millisecond)}, true},
		{"the zero time is not an earlier expiresAt", Window{ExpiresAt: at(2 * time.Hour)}, Window{ExpiresAt: &metav1.Time{}}, true},
		{"the zero time is not a later notBefore either", Window{}, Window{NotBefore: &metav1.Time{}}, true},
		{"year 10000 is not a later notBefore", Window{NotBefore: at(0)}, Window{NotBefore: &metav1.Time{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}, true},
		{"a stray bound left as it was: no change", Window{ExpiresAt: &metav1.Time{}}, Window{ExpiresAt: &metav1.Time{}}, false},
		{"the last instant accepted is a bound", Window{}, Window{ExpiresAt: &metav1.Time{Time: oriav1alpha1.LatestInstant}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.new.Widens(tc.old); got != tc.want {
				t.Errorf("Widens = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIntersectAndWhole(t *testing.T) {
	half := 500 * time.Millisecond
	for _, tc := range []struct {
		name string
		got  Window
		want Window
	}{
		{"intersect: the later start, the earlier end", Intersect(Window{NotBefore: at(0), ExpiresAt: at(time.Hour)}, Window{NotBefore: at(time.Minute), ExpiresAt: at(2 * time.Hour)}),
			Window{NotBefore: at(time.Minute), ExpiresAt: at(time.Hour)}},
		{"intersect with no window: unchanged", Intersect(Window{}, Window{ExpiresAt: at(time.Hour)}), Window{ExpiresAt: at(time.Hour)}},
		{"intersect of nothing: nothing", Intersect(Window{}, Window{}), Window{}},
		{"whole: notBefore up, expiresAt down", Window{NotBefore: at(half), ExpiresAt: at(time.Hour + half)}.Whole(),
			Window{NotBefore: at(time.Second), ExpiresAt: at(time.Hour)}},
		{"whole: whole seconds stay", Window{NotBefore: at(0), ExpiresAt: at(time.Hour)}.Whole(), Window{NotBefore: at(0), ExpiresAt: at(time.Hour)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, tc.got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestWindowDescribeAndLeft: Describe, for status, says instants only
// (a duration would go stale); Left is for kubectl oria, which prints the
// time left when it prints.
func TestWindowDescribeAndLeft(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  string
		want string
	}{
		{"open, with an end", Window{ExpiresAt: at(5*time.Hour + 59*time.Minute)}.Describe(t0), "until 2025-06-06T17:59:00Z"},
		{"open, no end", Window{NotBefore: at(-time.Hour)}.Describe(t0), ""},
		{"pending", Window{NotBefore: at(90 * time.Second), ExpiresAt: at(time.Hour)}.Describe(t0), "from 2025-06-06T12:01:30Z until 2025-06-06T13:00:00Z"},
		{"pending, no end", Window{NotBefore: at(3 * 24 * time.Hour)}.Describe(t0), "from 2025-06-09T12:00:00Z, with no end"},
		{"expired", Window{ExpiresAt: at(-time.Second)}.Describe(t0), "expired at 2025-06-06T11:59:59Z"},
		{"left: minutes", Left(119 * time.Minute), "119m"},
		{"left: a second", Left(1500 * time.Millisecond), "1s"},
		{"left: none", Left(-time.Second), "0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, tc.got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestWindowEmpty: a window is judged as compiled; one that never opens in
// whole seconds is empty.
func TestWindowEmpty(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		w    Window
		want bool
	}{
		{"no window", Window{}, false},
		{"one bound", Window{ExpiresAt: at(0)}, false},
		{"one whole second", Window{NotBefore: at(0), ExpiresAt: at(time.Second)}, false},
		{"inside one second (S.200 to S.800): inverted once rounded", Window{NotBefore: at(200 * ms), ExpiresAt: at(800 * ms)}, true},
		{"S.900 to S+1.100: empty once rounded", Window{NotBefore: at(900 * ms), ExpiresAt: at(1100 * ms)}, true},
		{"a nanosecond past a second, to two seconds on: one second", Window{NotBefore: at(time.Nanosecond), ExpiresAt: at(2 * time.Second)}, false},
		{"a nanosecond past a second, to one second on: empty", Window{NotBefore: at(time.Nanosecond), ExpiresAt: at(time.Second)}, true},
		{"inverted", Window{NotBefore: at(time.Hour), ExpiresAt: at(time.Minute)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.w.Empty(); got != tc.want {
				t.Errorf("Empty = %v, want %v", got, tc.want)
			}
		})
	}
}
