package v1alpha1

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRBACPolicySpecWindowRoundTrips: a policy's window decodes in whole
// seconds, rounded inward, and a decoded spec encodes to what decodes to
// itself; a bound outside 1970..9999 stays a bound (clamped), never "no
// bound".
func TestRBACPolicySpecWindowRoundTrips(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return v
	}
	for _, tc := range []struct {
		nb, exp         string
		wantNB, wantExp time.Time
	}{
		{`"2030-01-01T00:00:00.200Z"`, `"2030-01-01T00:00:02.800Z"`, at("2030-01-01T00:00:01Z"), at("2030-01-01T00:00:02Z")},
		{`"2030-01-01T00:00:00,5Z"`, `"2030-01-01T01:00:00+01:00"`, at("2030-01-01T00:00:01Z"), at("2030-01-01T00:00:00Z")},
		{`"0001-01-01T00:00:00Z"`, `"0001-01-01T00:00:00Z"`, EarliestInstant, EarliestInstant},
		{`"0000-01-01T00:00:00+01:00"`, `"9999-12-31T23:59:59-01:00"`, EarliestInstant, LatestInstant},
	} {
		var spec RBACPolicySpec
		require.NoError(t, json.Unmarshal([]byte(`{"extensionName":"e","access":"view","notBefore":`+tc.nb+`,"expiresAt":`+tc.exp+`}`), &spec))
		require.NotNil(t, spec.NotBefore, tc.nb)
		require.NotNil(t, spec.ExpiresAt, tc.exp)
		require.True(t, tc.wantNB.Equal(spec.NotBefore.Time), "%s: %s", tc.nb, spec.NotBefore)
		require.True(t, tc.wantExp.Equal(spec.ExpiresAt.Time), "%s: %s", tc.exp, spec.ExpiresAt)
		b, err := json.Marshal(spec)
		require.NoError(t, err)
		var again RBACPolicySpec
		require.NoError(t, json.Unmarshal(b, &again))
		require.Equal(t, spec, again, string(b))
	}
	var none RBACPolicySpec
	require.NoError(t, json.Unmarshal([]byte(`{"extensionName":"e","access":"view"}`), &none))
	require.Nil(t, none.NotBefore)
	require.Nil(t, none.ExpiresAt)
}
