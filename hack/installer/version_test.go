package installer

import (
	"bytes"
	"errors"
	"io"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/test/localcluster"
)

// TestRenderVersion: every object of the install carries the version
// label, the Deployment's pods too, and no selector does (a selector is
// immutable: an upgrade could not apply); without a version, none does.
func TestRenderVersion(t *testing.T) {
	b, err := RenderVersion(localcluster.RepoRoot(), DefaultDir, "registry.example.com/oria:v0.1.0", "v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, u := range documents(t, b) {
		kinds[u.GetKind()]++
		if got := u.GetLabels()[oriav1alpha1.LabelVersion]; got != "v0.1.0" {
			t.Errorf("%s %s: version label %q", u.GetKind(), u.GetName(), got)
		}
		if u.GetKind() != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		raw, _ := yaml.Marshal(u.Object)
		if err := yaml.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		if d.Spec.Template.Labels[oriav1alpha1.LabelVersion] != "v0.1.0" {
			t.Errorf("Deployment %s: its pods are not labelled with the version", d.Name)
		}
		if _, ok := d.Spec.Selector.MatchLabels[oriav1alpha1.LabelVersion]; ok {
			t.Errorf("Deployment %s: the version is in its selector", d.Name)
		}
	}
	if kinds["CustomResourceDefinition"] != 4 || kinds["Deployment"] != 1 {
		t.Errorf("kinds %v, want the four CRDs and the Deployment", kinds)
	}

	plain, err := Render(localcluster.RepoRoot(), DefaultDir, "")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(plain, []byte(oriav1alpha1.LabelVersion)) {
		t.Error("Render without a version labels objects with one")
	}
	if _, err := RenderVersion(localcluster.RepoRoot(), DefaultDir, "", "v0.1.0+build"); err == nil {
		t.Error("a version that is not a label value: no error")
	}
}

func documents(t *testing.T, b []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}
