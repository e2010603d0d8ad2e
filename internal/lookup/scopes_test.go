package lookup

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

func TestAPIScopes(t *testing.T) {
	fake := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	fake.Resources = []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "pods", Namespaced: true}}},
		{GroupVersion: "cert-manager.io/v1", APIResources: []metav1.APIResource{
			{Name: "certificates", Namespaced: true}, {Name: "clusterissuers", Namespaced: false}, {Name: "certificates/status", Namespaced: true},
		}},
	}
	now := time.Unix(0, 0)
	a := NewAPIScopes(fake)
	a.Now = func() time.Time { return now }

	cluster, unknown, err := a.ClusterScoped([]string{"certificates.cert-manager.io", "clusterissuers.cert-manager.io", "widgets.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"clusterissuers.cert-manager.io"}, cluster); diff != "" {
		t.Errorf("cluster-scoped (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"widgets.example.com"}, unknown); diff != "" {
		t.Errorf("unknown (-want +got):\n%s", diff)
	}
	calls := len(fake.Actions())

	// A new CRD appears in discovery; within the refresh interval it stays
	// unknown (no request), after it it is found.
	fake.Resources = append(fake.Resources, &metav1.APIResourceList{GroupVersion: "example.com/v1",
		APIResources: []metav1.APIResource{{Name: "widgets", Namespaced: false}}})
	if _, unknown, _ = a.ClusterScoped([]string{"widgets.example.com"}); len(unknown) != 1 || len(fake.Actions()) != calls {
		t.Errorf("refreshed within the interval: unknown %v, %d requests", unknown, len(fake.Actions())-calls)
	}
	now = now.Add(time.Second)
	cluster, unknown, _ = a.ClusterScoped([]string{"widgets.example.com", "certificates.cert-manager.io"})
	if diff := cmp.Diff([]string{"widgets.example.com"}, cluster); diff != "" || len(unknown) != 0 {
		t.Errorf("after refresh: cluster %v unknown %v", cluster, unknown)
	}
	// Known answers cost nothing.
	calls = len(fake.Actions())
	_, _, _ = a.ClusterScoped([]string{"widgets.example.com", "certificates.cert-manager.io"})
	if len(fake.Actions()) != calls {
		t.Error("a known scope was looked up again")
	}
}
