package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestKubectlOriaRequestApprove: eligible access through the plugin, each
// command run as its user (kubectl's --as and --as-group): alice requests,
// cannot approve herself, bob approves and alice gets access, requests
// lists who, what, where, until when and why; alice ends it early.
func TestKubectlOriaRequestApprove(t *testing.T) {
	testutil.NeedCluster(t)
	teamA := createNamespace(t, "team-a", nil)
	crd := extensionWithAPI(t, oriav1alpha1.RBACModeFineGrained)
	group, plural, ext := crd.Spec.Group, crd.Spec.Names.Plural, crd.Labels[oriav1alpha1.LabelOLMOwnerName]
	waitExtensionCondition(t, ext, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
	alice, bob := testutil.UniqueName("alice"), testutil.UniqueName("bob")
	devs, leads := testutil.UniqueName("devs"), testutil.UniqueName("leads")
	requesters(t, alice, bob)
	grantRules(t, alice, rbacv1.PolicyRule{APIGroups: []string{oriav1alpha1.GroupVersion.Group}, Resources: []string{"rbacpolicies"}, Verbs: []string{"list"}})
	policy := &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("devs-edit")}, Spec: oriav1alpha1.RBACPolicySpec{
		ExtensionName: ext, Access: oriav1alpha1.AccessEdit, Namespaces: []string{teamA},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: devs}},
		Eligibility: &oriav1alpha1.Eligibility{MaxDuration: metav1.Duration{Duration: time.Hour},
			Approvers: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: leads}}},
	}}
	testutil.Create(t, k8sClient, policy.DeepCopy())
	cleanup(t, policy)
	waitReason(t, policy, metav1.ConditionFalse, oriav1alpha1.ReasonEligible)
	aliceInA := testutil.Access{User: alice, Groups: []string{devs}, Verb: "create", Group: group, Resource: plural, Namespace: teamA}
	asAlice := []string{"--as", alice, "--as-group", devs, "--as-group", leads}
	asBob := []string{"--as", bob, "--as-group", leads}

	name := testutil.UniqueName("req")
	out := kubectlOria(t, append([]string{"request", "--extension", ext, "--access", "edit", "-n", teamA, "--for", "10m", "--reason", "INC-7: stuck", "--name", name}, asAlice...)...)
	t.Logf("kubectl oria request:\n%s", out)
	assert.Contains(t, out, "accessrequest.oria.operatorframework.io/"+name+" requested: edit access of RBACPolicy "+policy.Name+" for "+alice+" (as Group "+devs+")")
	cleanup(t, &oriav1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: name}})
	waitState(t, &oriav1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: name}}, oriav1alpha1.StateRequested)
	assert.Contains(t, kubectlOria(t, "requests", "--pending"), name)
	assert.False(t, can(t, aliceInA))

	_, stderr, err := runPlugin(t, "", append([]string{"approve", name}, asAlice...)...)
	require.Error(t, err, "alice may not approve her own request")
	assert.Contains(t, stderr, "may not decide on it")
	_, stderr, err = runPlugin(t, "", append([]string{"deny", name}, asBob...)...)
	require.Error(t, err)
	assert.Contains(t, stderr, "deny needs --reason")

	out = kubectlOria(t, append([]string{"approve", name, "--reason", "go ahead"}, asBob...)...)
	assert.Contains(t, out, "accessrequest.oria.operatorframework.io/"+name+" approved by "+bob)
	waitAllowed(t, true, aliceInA)
	got := waitState(t, &oriav1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: name}}, oriav1alpha1.StateActive)
	table := kubectlOria(t, "requests", "--active")
	t.Logf("kubectl oria requests --active:\n%s", table)
	for _, want := range []string{name, alice, policy.Name, teamA, "10m0s", "Active", bob, got.Status.StartsAt.UTC().Format(time.RFC3339),
		got.Status.EndsAt.UTC().Format(time.RFC3339), "INC-7: stuck"} {
		assert.Contains(t, table, want)
	}

	// status and access name the activation's requester and approver.
	statusText := kubectlOria(t, "status", ext)
	t.Logf("kubectl oria status:\n%s", statusText)
	assert.Contains(t, statusText, "AccessRequest "+name+": requested by \""+alice+"\" (INC-7: stuck), approved by \""+bob+"\" from "+
		got.Status.StartsAt.UTC().Format(time.RFC3339)+" until "+got.Status.EndsAt.UTC().Format(time.RFC3339))
	accessText := kubectlOria(t, "access", ext, "-n", teamA)
	t.Logf("kubectl oria access:\n%s", accessText)
	assert.Contains(t, accessText, "AccessRequest "+name)
	assert.Contains(t, accessText, "requested by \""+alice+"\", approved by \""+bob+"\"")

	out = kubectlOria(t, append([]string{"end", name, "--reason", "done"}, asAlice...)...)
	assert.Contains(t, out, "ended by "+alice)
	waitAllowed(t, false, aliceInA)
	got = waitState(t, &oriav1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: name}}, oriav1alpha1.StateEnded)
	assert.Equal(t, alice, got.Status.EndedBy)
	assert.NotContains(t, kubectlOria(t, "requests"), name, "a decided request is listed with --all only")
	assert.True(t, strings.Contains(kubectlOria(t, "requests", "--all"), name))
}
