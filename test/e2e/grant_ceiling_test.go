package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/cli"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestKubectlOriaGrantCeiling: kubectl oria grant --ceiling asks the API
// server, as plan does, whether the ceiling ServiceAccount may write each
// binding (a dry run as it). A ceiling that may write none of them is
// refused (exit 2, nothing created); one that may write some is granted in
// part, with a note, and access follows (SubjectAccessReviews): granted
// where the ceiling may bind, not where it may not.
func TestKubectlOriaGrantCeiling(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	crd := extensionWithAPI(t, oriav1alpha1.RBACModeFineGrained)
	group, plural, ext := crd.Spec.Group, crd.Spec.Names.Plural, crd.Labels[oriav1alpha1.LabelOLMOwnerName]
	waitExtensionCondition(t, ext, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
	saNS, allowed, denied := createNamespace(t, "ceil-sa", nil), createNamespace(t, "ceil-yes", nil), createNamespace(t, "ceil-no", nil)
	// The ceiling may bind any ClusterRole in one namespace, and nothing
	// in the other.
	ceiling(t, saNS, "grant-ceiling", []rbacv1.PolicyRule{{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, Verbs: []string{"bind"}}}, allowed)
	user := testutil.UniqueName("ceiled")
	list := func(ns string) testutil.Access {
		return testutil.Access{User: user, Verb: "list", Group: group, Resource: plural, Namespace: ns}
	}

	// Every binding refused: no grant.
	none := testutil.UniqueName("ceil-none")
	cleanup(t, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: none}})
	out, stderr, err := runPlugin(t, "", "grant", user, "--extension", ext, "--access", "view", "-n", denied, "--for", "1h",
		"--ceiling", saNS+"/grant-ceiling", "--name", none)
	t.Logf("the ceiling may write none: exit %d\n%s%s", exitCode(err), out, stderr)
	assert.Equal(t, cli.ExitNo, exitCode(err), "refused: exit 2")
	assert.Contains(t, stderr, "RBACPolicy "+none+" REFUSED: not created: it would grant nothing: ServiceAccount "+saNS+"/grant-ceiling (--ceiling) may write none of its ")
	assert.Contains(t, out, "which may not create it")
	assert.NotContains(t, out+stderr, "which plan does not ask")
	assert.True(t, apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Name: none}, &oriav1alpha1.RBACPolicy{})), "nothing created")

	// Some refused: granted in part, and said so.
	some := testutil.UniqueName("ceil-some")
	cleanup(t, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: some}})
	out, stderr, err = runPlugin(t, "", "grant", user, "--extension", ext, "--access", "view", "-n", allowed+","+denied, "--for", "1h",
		"--ceiling", saNS+"/grant-ceiling", "--name", some)
	t.Logf("the ceiling may write some: exit %d\n%s%s", exitCode(err), out, stderr)
	require.NoError(t, err)
	assert.Contains(t, stderr, "Note: the ceiling refuses ")
	assert.Contains(t, out, "rbacpolicy.oria.operatorframework.io/"+some+" granted in part: ")
	assert.Equal(t, &oriav1alpha1.ServiceAccountReference{Namespace: saNS, Name: "grant-ceiling"}, getPolicy(t, some).Spec.ServiceAccount)
	assert.True(t, can(t, list(allowed)), "granted where the ceiling may bind")
	assert.False(t, can(t, list(denied)), "not granted where the ceiling may not bind")
}
