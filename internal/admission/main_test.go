package admission

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/authz"
	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/localcluster"
)

// cluster is the package's control plane (etcd and kube-apiserver, RBAC
// on); nil with -short.
var cluster *localcluster.Cluster

func TestMain(m *testing.M) { testutil.RunMain(m, &cluster, localcluster.Options{}) }

// testGuard returns a guard that asks c (SubjectAccessReviews only, no
// rules in memory) and reads from c.
func testGuard(t testing.TB, c client.Client, scheme *runtime.Scheme) *Guard {
	t.Helper()
	az, err := authz.New(c, c, authz.NoRules{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(az, c, scheme)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
