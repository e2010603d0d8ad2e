package reconciler

import (
	"fmt"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// The API server's limits on an Event (events.k8s.io/v1, the API the
// recorders of package events write): it refuses an Event whose note,
// reason or action is longer, in bytes ("can have at most 1024
// characters"), and the recorder then drops it for good.
const (
	MaxEventNote   = 1024
	MaxEventReason = 128
	MaxEventAction = 128
)

// ellipsis marks a cut text.
const ellipsis = "…"

// LimitEvents returns rec cutting every Event to the API server's limits
// (Cut), so that an Event always arrives: a Warning carries a condition's
// message, which can be long (every forbidden permission of a ceiling), and
// the condition keeps the full text. Every recorder oria emits with is
// wrapped where a controller gets it. A nil rec stays nil.
func LimitEvents(rec events.EventRecorder) events.EventRecorder {
	if rec == nil {
		return nil
	}
	if _, ok := rec.(limited); ok {
		return rec
	}
	return limited{rec}
}

// limited is the recorder LimitEvents returns.
type limited struct{ events.EventRecorder }

// Eventf formats the note, cuts it, the reason and the action to the
// limits, and records the Event.
func (l limited) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	l.EventRecorder.Eventf(regarding, related, eventtype,
		Cut(reason, MaxEventReason), Cut(action, MaxEventAction), "%s", Cut(fmt.Sprintf(note, args...), MaxEventNote))
}

// Cut returns s when it is at most limit bytes long; otherwise the longest
// prefix of s that ends on a rune boundary and, followed by "…", fits in
// limit bytes, followed by "…". (With a limit too small for the marker,
// only a prefix of whole runes.)
func Cut(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	marker := ellipsis
	if limit < len(marker) {
		marker = ""
	}
	end := max(limit-len(marker), 0)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + marker
}
