package reconciler

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		name  string
		s     string
		limit int
		want  string
	}{
		{"short", "forbidden", 1024, "forbidden"},
		{"exactly the limit", strings.Repeat("a", 1024), 1024, strings.Repeat("a", 1024)},
		{"ASCII, one byte over", strings.Repeat("a", 1025), 1024, strings.Repeat("a", 1021) + "…"},
		// 2-byte runes: 1,021 bytes would split the 511th; 510 runes and
		// the marker are 1,023 bytes.
		{"two-byte runes", strings.Repeat("é", 600), 1024, strings.Repeat("é", 510) + "…"},
		// 3-byte runes: 340 runes are 1,020 bytes, the 341st would not fit
		// with the marker.
		{"three-byte runes", strings.Repeat("日", 400), 1024, strings.Repeat("日", 340) + "…"},
		{"four-byte runes after one ASCII byte", "x" + strings.Repeat("🔒", 300), 1024, "x" + strings.Repeat("🔒", 255) + "…"},
		{"a limit smaller than the marker", "éé", 2, "é"},
		{"a limit smaller than a rune", "日本", 2, ""},
		{"zero", "abc", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Cut(tc.s, tc.limit)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Cut (-want +got):\n%s", diff)
			}
			if len(got) > tc.limit || !utf8.ValidString(got) {
				t.Errorf("Cut = %d bytes, valid UTF-8 %v; want at most %d, valid", len(got), utf8.ValidString(got), tc.limit)
			}
		})
	}
}

// recorded is one Event as the wrapped recorder receives it.
type recorded struct {
	Type, Reason, Action, Note string
}

type capture struct{ got []recorded }

func (c *capture) Eventf(_, _ runtime.Object, eventtype, reason, action, note string, args ...any) {
	c.got = append(c.got, recorded{eventtype, reason, action, fmt.Sprintf(note, args...)})
}

// TestLimitEvents: a Forbidden message of many multi-byte characters, a
// long reason and a long action arrive cut to the API server's limits, on
// rune boundaries, marked; a short Event is unchanged.
func TestLimitEvents(t *testing.T) {
	c := &capture{}
	rec := LimitEvents(c)
	if LimitEvents(rec) != rec {
		t.Error("LimitEvents wraps a limited recorder again")
	}
	if LimitEvents(nil) != nil {
		t.Error("LimitEvents(nil) is not nil")
	}
	si := &oriav1alpha1.ScopeInstance{}
	long := "ServiceAccount « ceiling » may not grant: " + strings.Repeat("get secrets in namespace « ü », ", 60)
	rec.Eventf(si, nil, corev1.EventTypeWarning, strings.Repeat("R", 200), strings.Repeat("Ä", 100), "%s", long)
	rec.Eventf(si, nil, corev1.EventTypeNormal, "Bound", "Create", "created %d RoleBindings in %s", 3, "team-a")
	if len(c.got) != 2 {
		t.Fatalf("%d events recorded, want 2", len(c.got))
	}
	w := c.got[0]
	if len(w.Note) > MaxEventNote || !utf8.ValidString(w.Note) || !strings.HasSuffix(w.Note, "…") || !strings.HasPrefix(long, strings.TrimSuffix(w.Note, "…")) {
		t.Errorf("note: %d bytes, valid %v, %q", len(w.Note), utf8.ValidString(w.Note), w.Note)
	}
	if len(w.Note) < MaxEventNote-utf8.UTFMax {
		t.Errorf("note cut to %d bytes, more than needed", len(w.Note))
	}
	if diff := cmp.Diff(recorded{corev1.EventTypeWarning, strings.Repeat("R", 125) + "…", strings.Repeat("Ä", 62) + "…", w.Note}, w); diff != "" {
		t.Errorf("event (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(recorded{corev1.EventTypeNormal, "Bound", "Create", "created 3 RoleBindings in team-a"}, c.got[1]); diff != "" {
		t.Errorf("short event (-want +got):\n%s", diff)
	}
}

var _ events.EventRecorder = &capture{}
