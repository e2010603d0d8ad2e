package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UnmarshalJSON decodes a ScopeInstanceSpec. It exists for one shorthand:
// a namespaceSelector written as bare labels (`namespaceSelector: {fooKey:
// barValue}`, as the first ScopeInstance examples wrote it) rather than as
// a metav1.LabelSelector. The CRD keeps unknown fields under
// namespaceSelector (x-kubernetes-preserve-unknown-fields), and this decoder
// reads every key other than matchLabels and matchExpressions as the
// requirement "key In [value]", ANDed with the rest of the selector. A value
// that is not a string becomes a requirement with an invalid label value, so
// the selector fails to parse and the instance reports InvalidSelector
// instead of silently matching more namespaces than intended (a misspelt
// `matchLabel: {...}` is caught the same way).
//
// notBefore and expiresAt are read in whole seconds, as a metav1.Time
// encodes them, so that a decoded spec encodes to itself; a fraction of a
// second is rounded inward (notBefore up, expiresAt down), never widening
// the window, and an instant outside what encodes and decodes again is
// clamped into it (WholeSecond): a bound is never read as "no bound".
func (s *ScopeInstanceSpec) UnmarshalJSON(data []byte) error {
	// plain has the same fields but not this method, so decoding it does not
	// recurse.
	type plain ScopeInstanceSpec
	var raw struct {
		plain
		NamespaceSelector json.RawMessage `json:"namespaceSelector,omitempty"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*s = ScopeInstanceSpec(raw.plain)
	s.NotBefore, s.ExpiresAt = WholeSecond(s.NotBefore, true), WholeSecond(s.ExpiresAt, false)
	s.NamespaceSelector = nil
	sel, err := decodeNamespaceSelector(raw.NamespaceSelector)
	if err != nil {
		return fmt.Errorf("decoding namespaceSelector: %w", err)
	}
	s.NamespaceSelector = sel
	return nil
}

// decodeNamespaceSelector decodes a label selector that may carry bare
// labels next to matchLabels and matchExpressions (see UnmarshalJSON).
func decodeNamespaceSelector(data json.RawMessage) (*metav1.LabelSelector, error) {
	if len(data) == 0 || bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return nil, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, err
	}
	sel := &metav1.LabelSelector{}
	known := map[string]json.RawMessage{}
	var bare []string
	for k, v := range fields {
		switch k {
		case "matchLabels", "matchExpressions":
			known[k] = v
		default:
			bare = append(bare, k)
		}
	}
	if len(known) > 0 {
		b, err := json.Marshal(known)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, sel); err != nil {
			return nil, err
		}
	}
	sort.Strings(bare)
	for _, k := range bare {
		var value string
		if err := json.Unmarshal(fields[k], &value); err != nil {
			// Not a string (`team: 5`, `on: true`): say so in a value that
			// is never a valid label value (it has spaces), so parsing the
			// selector fails and the message names the key and the value.
			// The raw JSON alone would be valid for a number and silently
			// match the label "5".
			// Invalid UTF-8 is replaced as encoding/json does, so the
			// decoded spec encodes and decodes to itself.
			value = "non-string value " + strings.ToValidUTF8(string(fields[k]), "\uFFFD")
		}
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{value},
		})
	}
	return sel, nil
}
