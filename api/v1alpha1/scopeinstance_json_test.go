package v1alpha1

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestScopeInstanceSpecUnmarshalJSON(t *testing.T) {
	in := func(k, v string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}}
	}
	tests := []struct {
		name string
		json string
		want ScopeInstanceSpec
	}{{
		name: "no selector",
		json: `{"scopeTemplateName":"t","namespaces":["a","b"]}`,
		want: ScopeInstanceSpec{ScopeTemplateName: "t", Namespaces: []string{"a", "b"}},
	}, {
		name: "null selector",
		json: `{"scopeTemplateName":"t","namespaceSelector":null}`,
		want: ScopeInstanceSpec{ScopeTemplateName: "t"},
	}, {
		name: "empty selector matches everything",
		json: `{"scopeTemplateName":"t","namespaceSelector":{}}`,
		want: ScopeInstanceSpec{ScopeTemplateName: "t", NamespaceSelector: &metav1.LabelSelector{}},
	}, {
		name: "full label selector",
		json: `{"scopeTemplateName":"t","namespaceSelector":{"matchLabels":{"a":"b"},"matchExpressions":[{"key":"c","operator":"Exists"}]}}`,
		want: ScopeInstanceSpec{ScopeTemplateName: "t", NamespaceSelector: &metav1.LabelSelector{
			MatchLabels:      map[string]string{"a": "b"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "c", Operator: metav1.LabelSelectorOpExists}},
		}},
	}, {
		name: "design document shorthand",
		json: `{"scopeTemplateName":"foo","namespaces":["foo","bar"],"namespaceSelector":{"fooKey":"barValue"}}`,
		want: ScopeInstanceSpec{ScopeTemplateName: "foo", Namespaces: []string{"foo", "bar"}, NamespaceSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{in("fooKey", "barValue")},
		}},
	}, {
		name: "shorthand next to matchLabels, sorted",
		json: `{"scopeTemplateName":"t","namespaceSelector":{"z":"1","matchLabels":{"a":"b"},"m":"2"}}`,
		want: ScopeInstanceSpec{ScopeTemplateName: "t", NamespaceSelector: &metav1.LabelSelector{
			MatchLabels:      map[string]string{"a": "b"},
			MatchExpressions: []metav1.LabelSelectorRequirement{in("m", "2"), in("z", "1")},
		}},
	}, {
		name: "misspelt matchLabel is kept as an unparseable requirement",
		json: `{"scopeTemplateName":"t","namespaceSelector":{"matchLabel":{"a":"b"}}}`,
		want: ScopeInstanceSpec{ScopeTemplateName: "t", NamespaceSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{in("matchLabel", `non-string value {"a":"b"}`)},
		}},
	}, {
		name: "a number is not a label value: never matches team=5, fails to parse",
		json: `{"scopeTemplateName":"t","namespaceSelector":{"team":5}}`,
		want: ScopeInstanceSpec{ScopeTemplateName: "t", NamespaceSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{in("team", "non-string value 5")},
		}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got ScopeInstanceSpec
			if err := json.Unmarshal([]byte(tt.json), &got); err != nil {
				t.Fatal(err)
			}
			require.Equal(t, tt.want, got, "decoded spec")
			// The canonical form round-trips.
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			var again ScopeInstanceSpec
			if err := json.Unmarshal(b, &again); err != nil {
				t.Fatal(err)
			}
			require.Equal(t, got, again, "round trip")
			// Every value that is not a string makes the selector invalid.
			if strings.Contains(tt.json, "non-string") || strings.Contains(tt.name, "not a label value") || strings.Contains(tt.name, "misspelt") {
				_, err := metav1.LabelSelectorAsSelector(got.NamespaceSelector)
				require.Error(t, err, "a non-string bare label must not parse")
			}
		})
	}
}

func TestScopeInstanceUnmarshalKeepsMetadata(t *testing.T) {
	var si ScopeInstance
	if err := json.Unmarshal([]byte(`{"apiVersion":"oria.operatorframework.io/v1alpha1","kind":"ScopeInstance",
		"metadata":{"name":"foo","generation":3},"spec":{"scopeTemplateName":"foo"},"status":{"boundNamespaceCount":2}}`), &si); err != nil {
		t.Fatal(err)
	}
	if si.Name != "foo" || si.Generation != 3 || si.Spec.ScopeTemplateName != "foo" || si.Status.BoundNamespaceCount != 2 {
		t.Errorf("decoded %+v", si)
	}
}
