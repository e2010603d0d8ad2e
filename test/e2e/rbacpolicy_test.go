package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestRBACPolicyAsAnAdminWouldCheckIt walks through FineGrained mode with the
// samples the user guide shows, checking access with SubjectAccessReviews
// (and kubectl auth can-i where kubectl is installed).
func TestRBACPolicyAsAnAdminWouldCheckIt(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	applySample(t, "tour-extension.yaml")
	testutil.SetRBACMode(t, k8sClient, "argocd", oriav1alpha1.RBACModeFineGrained)

	alice := func(verb, ns string) testutil.Access {
		return testutil.Access{User: "alice", Groups: []string{"developers"}, Verb: verb, Group: "argoproj.io", Resource: "applications", Namespace: ns}
	}
	aliceCRD := testutil.Access{User: "alice", Groups: []string{"developers"}, Verb: "get",
		Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: "applications.argoproj.io"}

	// FineGrained alone grants nothing.
	eventuallyAccess(t, false, alice("list", "team-a"), alice("get", "team-a"))

	// view in team-a: read there, nowhere else, no writes.
	view := applySample(t, "rbacpolicy-view-team-a.yaml")
	waitPolicyReady(t, "argocd-developers-view")
	eventuallyAccess(t, true, alice("list", "team-a"), alice("get", "team-a"), alice("watch", "team-a"))
	eventuallyAccess(t, false, alice("list", "team-b"), alice("create", "team-a"), alice("delete", "team-a"), alice("list", ""))
	kubectlCanI(t, "yes", "list", "applications.argoproj.io", "team-a")
	kubectlCanI(t, "no", "list", "applications.argoproj.io", "team-b")

	// edit in team-a: create and read.
	edit := applySample(t, "rbacpolicy-edit-team-a.yaml")
	waitPolicyReady(t, "argocd-developers-edit")
	eventuallyAccess(t, true, alice("create", "team-a"), alice("update", "team-a"), alice("delete", "team-a"), alice("list", "team-a"))
	eventuallyAccess(t, false, alice("create", "team-b"))

	// cluster-wide admin for alice: everything everywhere, the CRD too.
	admin := applySample(t, "rbacpolicy-admin-cluster.yaml")
	waitPolicyReady(t, "argocd-alice-admin")
	eventuallyAccess(t, true, alice("delete", "team-b"), alice("deletecollection", "team-b"), alice("list", ""), alice("create", "default"), aliceCRD)
	p := &oriav1alpha1.RBACPolicy{}
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKey{Name: "argocd-alice-admin"}, p))
	assert.Equal(t, oriav1alpha1.ScopeCluster, p.Status.Scope)
	assert.Equal(t, []string{"applications.argoproj.io"}, p.Status.APIs)

	// Deleting the policies revokes everything.
	deleteObjects(t, admin)
	deleteObjects(t, edit)
	deleteObjects(t, view)
	eventuallyAccess(t, false, alice("list", "team-a"), alice("create", "team-a"), alice("delete", "team-b"), aliceCRD)
}

// TestRBACPolicySelectorSample applies the selector sample: a ServiceAccount
// gains access in namespaces as they are labelled.
func TestRBACPolicySelectorSample(t *testing.T) {
	testutil.NeedCluster(t)
	applySample(t, "tour-extension.yaml")
	testutil.SetRBACMode(t, k8sClient, "argocd", oriav1alpha1.RBACModeFineGrained)
	applySample(t, "rbacpolicy-selector.yaml")
	waitPolicyReady(t, "argocd-ci-dev")

	ns := testutil.CreateNamespace(t, k8sClient, "dev", map[string]string{"env": "dev"})
	deployer := testutil.Access{User: "system:serviceaccount:ci:deployer", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ci"},
		Verb: "create", Group: "argoproj.io", Resource: "applications", Namespace: ns}
	eventuallyAccess(t, true, deployer)
	other := deployer
	other.Namespace = "team-a"
	eventuallyAccess(t, false, other)
}

// waitPolicyReady is `kubectl wait --for=condition=Ready rbacpolicy/<name>`.
func waitPolicyReady(t *testing.T, name string) {
	t.Helper()
	testutil.EventuallyCondition(t, k8sClient, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}},
		testutil.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionTrue})
}

// kubectlCanI runs `kubectl auth can-i --as=alice --as-group=developers` when
// kubectl is installed (it is optional here: SubjectAccessReviews are the
// real check), waiting for the expected answer.
func kubectlCanI(t *testing.T, want, verb, resource, ns string) {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Log("kubectl not installed; SubjectAccessReviews cover this check")
		return
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		out, _ := exec.Command(kubectl, "--kubeconfig", cluster.Kubeconfig, "auth", "can-i", verb, resource,
			"--as=alice", "--as-group=developers", "-n", ns).CombinedOutput()
		assert.Equal(c, want, strings.TrimSpace(string(out)))
	}, 30*time.Second, 200*time.Millisecond)
}
