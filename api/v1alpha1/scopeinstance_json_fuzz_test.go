package v1alpha1

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
)

// FuzzScopeInstanceSpecUnmarshalJSON: decoding any bytes as a
// ScopeInstanceSpec (the design document's bare-label selector included)
// never panics, and what decodes is canonical: encoded and decoded again,
// it is the same spec (the guard and the controller read the same thing
// whoever re-encodes it).
func FuzzScopeInstanceSpecUnmarshalJSON(f *testing.F) {
	for _, seed := range []string{
		`{"scopeTemplateName":"t","namespaces":["a","b"]}`,
		`{"scopeTemplateName":"t","namespaceSelector":null}`,
		`{"scopeTemplateName":"t","namespaceSelector":{}}`,
		`{"scopeTemplateName":"t","namespaceSelector":{"matchLabels":{"a":"b"},"matchExpressions":[{"key":"c","operator":"Exists"}]}}`,
		`{"scopeTemplateName":"foo","namespaces":["foo","bar"],"namespaceSelector":{"fooKey":"barValue"}}`,
		`{"scopeTemplateName":"t","namespaceSelector":{"z":"1","matchLabels":{"a":"b"},"m":"2"}}`,
		`{"scopeTemplateName":"t","namespaceSelector":{"matchLabel":{"a":"b"}}}`,
		`{"scopeTemplateName":"t","namespaceSelector":{"team":5}}`,
		`{"scopeTemplateName":"t","namespaceSelector":[]}`,
		"{\"namespaceSelector\":{\"\":{\"\xb8\":\"\"}}}", // invalid UTF-8 in a non-string value
		`{"scopeTemplateName":"t","serviceAccount":{"namespace":"ops","name":"ceiling"},"publication":{"configMap":{"namespace":"ops","name":"watch"},"restartLabels":{"app":"op"}}}`,
		`{"scopeTemplateName":"t","notBefore":"2025-06-06T12:00:00.25+02:00","expiresAt":"2025-06-06T18:00:00.75Z"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var first ScopeInstanceSpec
		if json.Unmarshal(data, &first) != nil {
			return
		}
		b, err := json.Marshal(first)
		if err != nil {
			t.Fatalf("a decoded spec does not encode: %v", err)
		}
		var again ScopeInstanceSpec
		if err := json.Unmarshal(b, &again); err != nil {
			t.Fatalf("an encoded spec does not decode: %v\n%s", err, b)
		}
		if !equality.Semantic.DeepEqual(first, again) {
			t.Errorf("not canonical:\nfirst %#v\nagain %#v\nfrom %s", first, again, b)
		}
	})
}
