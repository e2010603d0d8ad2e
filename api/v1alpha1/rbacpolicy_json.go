package v1alpha1

import "encoding/json"

// UnmarshalJSON decodes an RBACPolicySpec, reading notBefore and expiresAt
// in whole seconds as ScopeInstanceSpec does (WholeSecond): a fraction of a
// second is rounded inward (notBefore up, expiresAt down), so that a
// decoded spec encodes to itself (a metav1.Time encodes without a
// fraction: notBefore written back as read by a plain metav1.Time would
// start up to a second earlier) and never grants wider than the policy's
// compiled ScopeInstance; a bound outside what encodes and decodes again
// is clamped into it, never read as "no bound".
func (s *RBACPolicySpec) UnmarshalJSON(data []byte) error {
	// plain has the same fields but not this method, so decoding it does not
	// recurse.
	type plain RBACPolicySpec
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*s = RBACPolicySpec(p)
	s.NotBefore, s.ExpiresAt = WholeSecond(s.NotBefore, true), WholeSecond(s.ExpiresAt, false)
	return nil
}
