package olm

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func TestExtensionOf(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		want   string
	}{
		{OwnerLabels("argocd"), "argocd"},
		{map[string]string{"olm.operatorframework.io/owner-name": "argocd"}, ""},
		{map[string]string{"olm.operatorframework.io/owner-kind": "ClusterObjectSet", "olm.operatorframework.io/owner-name": "argocd"}, ""},
		{nil, ""},
	} {
		obj := &metav1.ObjectMeta{Labels: tc.labels}
		if got := ExtensionOf(obj); got != tc.want {
			t.Errorf("ExtensionOf(%v) = %q, want %q", tc.labels, got, tc.want)
		}
		if got := InstalledByExtension().Matches(labels.Set(tc.labels)); got != (tc.want != "") {
			t.Errorf("InstalledByExtension matches %v: %v", tc.labels, got)
		}
	}
}
