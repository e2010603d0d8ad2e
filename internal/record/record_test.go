package record

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestCheck(t *testing.T) {
	now := time.Date(2026, 6, 6, 12, 0, 0, 0, time.UTC)
	at := Now(now)
	granted := map[string]string{Grant.By: "alice", Grant.At: at, Grant.Reason: "INC-1"}
	with := func(base map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(out, kv[i])
			} else {
				out[kv[i]] = kv[i+1]
			}
		}
		return out
	}
	revoked := with(granted, Revocation.By, "bob", Revocation.At, at, Revocation.Reason, "done")
	for _, tc := range []struct {
		name     string
		old, obj map[string]string
		create   bool
		user     string
		want     []string // parts of the refusal; none: admitted
	}{
		{name: "create, own record", obj: granted, create: true, user: "alice"},
		{name: "create, no record", obj: map[string]string{"x": "y"}, create: true, user: "alice"},
		{name: "create, someone else's name", obj: granted, create: true, user: "mallory", want: []string{`says "alice", but the request is made by "mallory"`}},
		{name: "create, a time in the past", obj: with(granted, Grant.At, "2020-01-01T00:00:00Z"), create: true, user: "alice", want: []string{"at most 5m0s apart"}},
		{name: "create, not a time", obj: with(granted, Grant.At, "yesterday"), create: true, user: "alice", want: []string{"not an RFC 3339 time"}},
		{name: "create, a forged revocation", obj: with(granted, Revocation.By, "bob", Revocation.At, at), create: true, user: "alice", want: []string{`says "bob"`}},
		{name: "update, unrelated", old: granted, obj: with(granted, "x", "y"), user: "mallory"},
		{name: "update, granted-by changed", old: granted, obj: with(granted, Grant.By, "mallory"), user: "mallory", want: []string{"never changed"}},
		{name: "update, granted-by removed", old: granted, obj: with(granted, Grant.By, ""), user: "mallory", want: []string{"never changed"}},
		{name: "update, granted-by added", old: map[string]string{}, obj: map[string]string{Grant.By: "mallory"}, user: "mallory", want: []string{"written when the object is created"}},
		{name: "update, granted-at changed", old: granted, obj: with(granted, Grant.At, Now(now.Add(time.Second))), user: "alice", want: []string{"never changed"}},
		{name: "update, the granter's reason changed", old: granted, obj: with(granted, Grant.Reason, "other"), user: "alice", want: []string{`the reason "alice" gave`}},
		{name: "update, reason of an unrecorded grant", old: map[string]string{Grant.Reason: "a"}, obj: map[string]string{Grant.Reason: "b"}, user: "x"},
		{name: "revoke, own record", old: granted, obj: revoked, user: "bob"},
		{name: "revoke, someone else's name", old: granted, obj: revoked, user: "mallory", want: []string{`says "bob", but the request is made by "mallory"`}},
		{name: "revoke, no time", old: granted, obj: with(revoked, Revocation.At, ""), user: "bob", want: []string{"must say when"}},
		{name: "revocation reason changed alone", old: revoked, obj: with(revoked, Revocation.Reason, "forged"), user: "mallory", want: []string{`says "bob"`}},
		{name: "revocation removed", old: revoked, obj: granted, user: "mallory", want: []string{"never removed"}},
		{name: "revocation rewritten whole by its author", old: revoked, obj: with(revoked, Revocation.By, "carol", Revocation.Reason, "again"), user: "carol"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(Check(tc.old, tc.obj, tc.create, tc.user, now), "; ")
			if len(tc.want) == 0 {
				assert.Empty(t, got)
			}
			for _, w := range tc.want {
				assert.Contains(t, got, w)
			}
		})
	}
}

func TestRecordString(t *testing.T) {
	assert.Equal(t, `by "alice" at 2026-06-06T12:00:00Z: INC-1`, Record{By: "alice", At: "2026-06-06T12:00:00Z", Reason: "INC-1"}.String())
	assert.Equal(t, "reason: INC-1", Record{Reason: "INC-1"}.String())
	assert.Empty(t, Record{}.String())
}
