// Package record keeps the record of a grant and of its revocation on an
// RBACPolicy or a ScopeInstance: who did it, when and why, in annotations
// (oriav1alpha1.AnnotationGrantedBy and the others). Who is the user name
// the API server authenticated, never what a field claims: the escalation
// guard refuses any write of a record that is not the requester's own
// (Check), for every requester. oria decides nothing from a record; it
// names it in events, and `kubectl oria status` and `access` show it.
package record

import (
	"fmt"
	"time"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// MaxSkew is how far a record's time ("-at") may be from the guard's clock
// when it is written: the plugin writes its own clock, which may differ a
// little from the API server's.
const MaxSkew = 5 * time.Minute

// Keys are the annotations of one record.
type Keys struct {
	By, At, Reason string
	// What names the record in messages: "grant" or "revocation".
	What string
}

// Grant is the record of a grant, written when the object is created;
// Revocation that of its revocation, written by the update that ends it.
var (
	Grant      = Keys{By: oriav1alpha1.AnnotationGrantedBy, At: oriav1alpha1.AnnotationGrantedAt, Reason: oriav1alpha1.AnnotationReason, What: "grant"}
	Revocation = Keys{By: oriav1alpha1.AnnotationRevokedBy, At: oriav1alpha1.AnnotationRevokedAt, Reason: oriav1alpha1.AnnotationRevokeReason, What: "revocation"}
)

// Record is who did something, when (RFC 3339, as stored) and why.
type Record struct {
	By     string `json:"by,omitempty"`
	At     string `json:"at,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Of reads the record k from annotations.
func (k Keys) Of(annotations map[string]string) Record {
	return Record{By: annotations[k.By], At: annotations[k.At], Reason: annotations[k.Reason]}
}

// Set writes r into annotations under k (empty fields are left out) and
// returns them.
func (k Keys) Set(annotations map[string]string, r Record) map[string]string {
	if annotations == nil {
		annotations = map[string]string{}
	}
	for key, v := range map[string]string{k.By: r.By, k.At: r.At, k.Reason: r.Reason} {
		if v != "" {
			annotations[key] = v
		}
	}
	return annotations
}

// Empty reports whether nothing is recorded.
func (r Record) Empty() bool { return r == Record{} }

// String writes the record as events and reports say it: `by "alice" at
// 2025-06-06T12:00:00Z: INC-1234` (each part only when recorded).
func (r Record) String() string {
	var s string
	if r.By != "" {
		s = fmt.Sprintf("by %q", r.By)
	}
	if r.At != "" {
		s = join(s, "at "+r.At)
	}
	if r.Reason != "" {
		if s == "" {
			return "reason: " + r.Reason
		}
		s += ": " + r.Reason
	}
	return s
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + " " + b
}

// Now is how a record writes the time: RFC 3339, UTC, whole seconds.
func Now(now time.Time) string { return now.UTC().Truncate(time.Second).Format(time.RFC3339) }

// Check returns why a write from old (nil on create) to obj, by user
// (the name the API server authenticated), at now, may not store its
// records; none when it may. It applies to every requester:
//
//   - the grant's record is written when the object is created: its "by"
//     must be user, its "at" now (within MaxSkew); an update may not add,
//     change or remove either, nor change the reason once a "by" is
//     recorded (the reason is the granter's);
//   - a revocation's record is written whole by its author: an update (or
//     a create) that adds or changes any of its annotations must set its
//     "by" to user and its "at" to now; removing it is such a change.
//
// It is pure and asks nothing of the API server.
func Check(old, obj map[string]string, create bool, user string, now time.Time) []string {
	var out []string
	grant, was := Grant.Of(obj), Grant.Of(old)
	if create {
		out = append(out, authored(Grant, grant, user, now)...)
	} else {
		for _, key := range []string{Grant.By, Grant.At} {
			if obj[key] != old[key] {
				out = append(out, fmt.Sprintf("annotation %s is written when the object is created, and never changed (it was %q, the update makes it %q)",
					key, old[key], obj[key]))
			}
		}
		if was.By != "" && grant.Reason != was.Reason {
			out = append(out, fmt.Sprintf("annotation %s is the reason %q gave for the grant, and is never changed (it was %q, the update makes it %q)",
				Grant.Reason, was.By, was.Reason, grant.Reason))
		}
	}
	if rev := Revocation.Of(obj); rev != Revocation.Of(old) {
		if rev.By == "" {
			out = append(out, fmt.Sprintf("the record of a revocation (annotations %s, %s, %s) is written whole by whoever revokes, and never removed: set %s to your own user name, %q",
				Revocation.By, Revocation.At, Revocation.Reason, Revocation.By, user))
		} else {
			out = append(out, authored(Revocation, rev, user, now)...)
		}
	}
	return out
}

// authored checks that r, written by user at now, names user and now.
func authored(k Keys, r Record, user string, now time.Time) []string {
	var out []string
	if r.By != "" && r.By != user {
		out = append(out, fmt.Sprintf("annotation %s says %q, but the request is made by %q: the %s's record names who made it, as the API server authenticated them",
			k.By, r.By, user, k.What))
	}
	if k == Revocation && r.At == "" {
		out = append(out, fmt.Sprintf("annotation %s must say when, RFC 3339 (now is %s)", k.At, Now(now)))
	}
	if r.At == "" {
		return out
	}
	at, err := time.Parse(time.RFC3339, r.At)
	switch {
	case err != nil:
		out = append(out, fmt.Sprintf("annotation %s: %q is not an RFC 3339 time", k.At, r.At))
	case at.Sub(now).Abs() > MaxSkew:
		out = append(out, fmt.Sprintf("annotation %s says %s, but the %s is made now, %s (at most %v apart)", k.At, r.At, k.What, Now(now), MaxSkew))
	}
	return out
}
