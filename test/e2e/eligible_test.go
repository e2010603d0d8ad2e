package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/eligibility"
	"github.com/operator-framework/oria/internal/record"
	"github.com/operator-framework/oria/internal/testutil"
)

// Eligible access (issue 43): alice (group devs) is eligible for edit on an
// extension's API in team-a, for at most 1 h, approved by group leads. Each
// step is checked with SubjectAccessReviews, each bad input is refused at
// admission, naming why.

// requester gives users create/get/list/update/patch on AccessRequests
// (nothing else): what lets them ask, decide and end, as far as the guard
// lets them.
func requesters(t *testing.T, users ...string) {
	t.Helper()
	name := testutil.UniqueName("requesters")
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{oriav1alpha1.GroupVersion.Group}, Resources: []string{"accessrequests"},
		Verbs: []string{"create", "get", "list", "watch", "update", "patch"},
	}}}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}}
	for _, u := range users {
		crb.Subjects = append(crb.Subjects, testutil.User(u))
	}
	testutil.Create(t, k8sClient, role)
	testutil.Create(t, k8sClient, crb)
	cleanup(t, role, crb)
}

// accessRequest is alice's request to activate policy in namespaces.
func accessRequest(policy, requester, group string, d time.Duration, reason string, namespaces ...string) *oriav1alpha1.AccessRequest {
	return &oriav1alpha1.AccessRequest{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("req")},
		Spec: oriav1alpha1.AccessRequestSpec{PolicyName: policy, Requester: requester, Namespaces: namespaces,
			EligibleAs: &rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: group},
			Duration:   metav1.Duration{Duration: d}, Reason: reason},
	}
}

// decide writes decision k on request r as c, by user.
func decide(t *testing.T, c client.Client, r *oriav1alpha1.AccessRequest, k record.Keys, by, reason string) error {
	t.Helper()
	obj := &oriav1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: r.Name}}
	return userUpdate(t, c, obj, func() {
		obj.Annotations = k.Set(obj.Annotations, record.Record{By: by, At: record.Now(time.Now()), Reason: reason})
	})
}

// waitState waits until request r is in state, and returns it.
func waitState(t *testing.T, r *oriav1alpha1.AccessRequest, state oriav1alpha1.RequestState) *oriav1alpha1.AccessRequest {
	t.Helper()
	got := &oriav1alpha1.AccessRequest{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, k8sClient.Get(context.Background(), client.ObjectKey{Name: r.Name}, got))
		assert.Equal(c, state, got.Status.State, "%+v", got.Status.Conditions)
	}, testutil.Timeout, 50*time.Millisecond)
	return got
}

func TestEligibleAccess(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	teamA, teamB := createNamespace(t, "team-a", nil), createNamespace(t, "team-b", nil)
	crd := extensionWithAPI(t, oriav1alpha1.RBACModeFineGrained)
	group, plural, ext := crd.Spec.Group, crd.Spec.Names.Plural, crd.Labels[oriav1alpha1.LabelOLMOwnerName]
	waitExtensionCondition(t, ext, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)

	alice, bob, carol, dave, erin := testutil.UniqueName("alice"), testutil.UniqueName("bob"), testutil.UniqueName("carol"),
		testutil.UniqueName("dave"), testutil.UniqueName("erin")
	devs, leads := testutil.UniqueName("devs"), testutil.UniqueName("leads")
	requesters(t, alice, bob, carol, dave, erin)
	asAlice := impersonate(t, alice, devs, leads) // in leads too: still no self-approval
	asBob, asCarol := impersonate(t, bob, leads), impersonate(t, carol)
	asDave, asErin := impersonate(t, dave, leads), impersonate(t, erin, devs)

	policy := &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("devs-edit")}, Spec: oriav1alpha1.RBACPolicySpec{
		ExtensionName: ext, Access: oriav1alpha1.AccessEdit, Namespaces: []string{teamA},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: devs}},
		Eligibility: &oriav1alpha1.Eligibility{MaxDuration: metav1.Duration{Duration: time.Hour}, RequireReason: true,
			Approvers: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: leads}}},
	}}
	testutil.Create(t, k8sClient, policy.DeepCopy())
	cleanup(t, policy)
	waitReason(t, policy, metav1.ConditionFalse, oriav1alpha1.ReasonEligible)

	aliceIn := func(ns string) testutil.Access {
		return testutil.Access{User: alice, Groups: []string{devs, leads}, Verb: "create", Group: group, Resource: plural, Namespace: ns}
	}
	erinInA := testutil.Access{User: erin, Groups: []string{devs}, Verb: "create", Group: group, Resource: plural, Namespace: teamA}
	require.False(t, can(t, aliceIn(teamA)), "eligible is not granted: the policy binds nothing by itself")
	require.False(t, can(t, erinInA))

	// Bad requests, each refused at admission, naming why.
	for _, bad := range []struct {
		name  string
		as    client.Client
		req   *oriav1alpha1.AccessRequest
		parts []string
	}{
		{"a non-eligible user", asDave, accessRequest(policy.Name, dave, devs, 10*time.Minute, "x", teamA), []string{`user "` + dave + `" is not Group`}},
		{"another requester named", asAlice, accessRequest(policy.Name, bob, devs, 10*time.Minute, "x", teamA), []string{"spec.requester says", `made by "` + alice + `"`}},
		{"over the maximum", asAlice, accessRequest(policy.Name, alice, devs, 2*time.Hour, "x", teamA), []string{"spec.duration 2h0m0s is more than", "maxDuration 1h0m0s"}},
		{"zero", asAlice, accessRequest(policy.Name, alice, devs, 0, "x", teamA), []string{"spec.duration must be more than zero"}},
		{"negative", asAlice, accessRequest(policy.Name, alice, devs, -time.Minute, "x", teamA), []string{"spec.duration must be more than zero"}},
		{"a namespace outside", asAlice, accessRequest(policy.Name, alice, devs, 10*time.Minute, "x", teamA, teamB), []string{"spec.namespaces " + teamB, "grants only in " + teamA}},
		{"no reason", asAlice, accessRequest(policy.Name, alice, devs, 10*time.Minute, "", teamA), []string{"spec.reason is required"}},
		{"no such policy", asAlice, accessRequest("nope-"+policy.Name, alice, devs, 10*time.Minute, "x", teamA), []string{"does not exist"}},
	} {
		refused(t, bad.as.Create(ctx, bad.req), bad.parts...)
	}

	// alice asks for 10 minutes, with a reason: no access while pending.
	req := accessRequest(policy.Name, alice, devs, 10*time.Minute, "INC-42: sync stuck", teamA)
	require.NoError(t, asAlice.Create(ctx, req.DeepCopy()))
	cleanup(t, req)
	waitState(t, req, oriav1alpha1.StateRequested)
	assert.False(t, can(t, aliceIn(teamA)), "no access while pending")

	// Self-approval (alice is in leads) and carol (may update requests, no
	// approver) are refused.
	refused(t, decide(t, asAlice, req, eligibility.Approval, alice, ""), "made this request and may not decide on it")
	refused(t, decide(t, asCarol, req, eligibility.Approval, carol, ""), `user "`+carol+`" is not an approver`)
	refused(t, decide(t, asCarol, req, eligibility.Approval, bob, ""), `says "`+bob+`", but the request is made by "`+carol+`"`)
	assert.False(t, can(t, aliceIn(teamA)))

	// bob approves: alice, and only alice, in team-a only, at once.
	approved := time.Now()
	require.NoError(t, decide(t, asBob, req, eligibility.Approval, bob, "ok"))
	granted := waitAllowed(t, true, aliceIn(teamA))
	t.Logf("access %s after the approval", granted.Sub(approved).Round(time.Millisecond))
	assert.Less(t, granted.Sub(approved), windowJitter)
	assert.False(t, can(t, aliceIn(teamB)), "only in the requested namespace")
	assert.False(t, can(t, aliceIn("")), "not cluster-wide")
	assert.False(t, can(t, erinInA), "to the requesting user, not to the group")
	got := waitState(t, req, oriav1alpha1.StateActive)
	assert.Equal(t, bob, got.Status.ApprovedBy)
	require.NotNil(t, got.Status.StartsAt)
	require.NotNil(t, got.Status.EndsAt)
	assert.Equal(t, 10*time.Minute, got.Status.EndsAt.Sub(got.Status.StartsAt.Time))
	assert.WithinDuration(t, approved, got.Status.StartsAt.Time, 2*time.Second)
	testutil.EventuallyCondition(t, k8sClient, got, testutil.Condition{Type: oriav1alpha1.TypeActive, Status: metav1.ConditionTrue, Reason: oriav1alpha1.ReasonBound})
	eventNamed(t, got, oriav1alpha1.ReasonApproved, "approved by \""+bob+"\"")

	// A decided request is never edited: no second approval, no denial,
	// no change of the spec.
	refused(t, decide(t, asDave, req, eligibility.Approval, dave, ""), "is on record")
	refused(t, decide(t, asDave, req, eligibility.Denial, dave, "no"), "not waiting for a decision")
	err := userUpdate(t, asAlice, &oriav1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: req.Name}}, func() {})
	require.NoError(t, err, "an update that changes nothing is admitted")
	spec := &oriav1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: req.Name}}
	err = userUpdate(t, asAlice, spec, func() { spec.Spec.Duration.Duration = time.Hour })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "immutable record")

	// The policy deleted while active: access ends within a second or two.
	deleted := time.Now()
	require.NoError(t, k8sClient.Delete(ctx, policy.DeepCopy()))
	ended := waitAllowed(t, false, aliceIn(teamA))
	t.Logf("access ended %s after the policy's deletion", ended.Sub(deleted).Round(time.Millisecond))
	assert.Less(t, ended.Sub(deleted), windowJitter)
	got = waitState(t, req, oriav1alpha1.StateEnded)
	assert.Equal(t, eligibility.ByOria, got.Status.EndedBy)

	// Again, with a request of 3 s: it ends on time.
	policy.ResourceVersion, policy.UID = "", ""
	requireEventuallyCreated(t, policy)
	waitReason(t, policy, metav1.ConditionFalse, oriav1alpha1.ReasonEligible)
	short := accessRequest(policy.Name, alice, devs, 3*time.Second, "quick look", teamA)
	require.NoError(t, asAlice.Create(ctx, short.DeepCopy()))
	cleanup(t, short)
	require.NoError(t, decide(t, asBob, short, eligibility.Approval, bob, ""))
	waitAllowed(t, true, aliceIn(teamA))
	got = waitState(t, short, oriav1alpha1.StateActive)
	ended = waitAllowed(t, false, aliceIn(teamA))
	t.Logf("access ended %s after status.endsAt %s", ended.Sub(got.Status.EndsAt.Time).Round(time.Millisecond), got.Status.EndsAt.Format(time.RFC3339))
	assert.Less(t, ended.Sub(got.Status.EndsAt.Time), windowJitter)
	got = waitState(t, short, oriav1alpha1.StateEnded)
	assert.Contains(t, activeCondition(got).Message, "its time is up")

	// erin cancels her own pending request; a cancelled one is not
	// approved later. A denied one neither.
	cancelled := accessRequest(policy.Name, erin, devs, time.Minute, "x", teamA)
	require.NoError(t, asErin.Create(ctx, cancelled.DeepCopy()))
	cleanup(t, cancelled)
	require.NoError(t, decide(t, asErin, cancelled, eligibility.End, erin, "not needed"))
	waitState(t, cancelled, oriav1alpha1.StateCancelled)
	refused(t, decide(t, asBob, cancelled, eligibility.Approval, bob, ""), "is Cancelled, not waiting")
	denied := accessRequest(policy.Name, erin, devs, time.Minute, "x", teamA)
	require.NoError(t, asErin.Create(ctx, denied.DeepCopy()))
	cleanup(t, denied)
	refused(t, decide(t, asBob, denied, eligibility.Denial, bob, ""), "a denial says why")
	require.NoError(t, decide(t, asBob, denied, eligibility.Denial, bob, "use the staging cluster"))
	waitState(t, denied, oriav1alpha1.StateDenied)
	refused(t, decide(t, asDave, denied, eligibility.Approval, dave, ""), "is Denied, not waiting")
	refused(t, decide(t, asErin, denied, eligibility.End, erin, ""), "is Denied already")
	assert.False(t, can(t, erinInA))

	// A pending request whose policy is deleted is cancelled; approving it
	// then is refused.
	pending := accessRequest(policy.Name, erin, devs, time.Minute, "x", teamA)
	require.NoError(t, asErin.Create(ctx, pending.DeepCopy()))
	cleanup(t, pending)
	waitState(t, pending, oriav1alpha1.StateRequested)
	require.NoError(t, k8sClient.Delete(ctx, policy.DeepCopy()))
	waitState(t, pending, oriav1alpha1.StateCancelled)
	refused(t, decide(t, asBob, pending, eligibility.Approval, bob, ""), "is not an approver")
}

// requireEventuallyCreated creates obj (as admin) once the name is free.
func requireEventuallyCreated(t *testing.T, obj client.Object) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, k8sClient.Create(context.Background(), obj.DeepCopyObject().(client.Object)))
	}, testutil.Timeout, 100*time.Millisecond)
}

// activeCondition is the request's Active condition.
func activeCondition(r *oriav1alpha1.AccessRequest) metav1.Condition {
	for _, c := range r.Status.Conditions {
		if c.Type == oriav1alpha1.TypeActive {
			return c
		}
	}
	return metav1.Condition{}
}

// eventNamed waits for a Normal Event of reason on r whose note has part.
func eventNamed(t *testing.T, r *oriav1alpha1.AccessRequest, reason, part string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var list eventsv1.EventList
		require.NoError(c, k8sClient.List(context.Background(), &list))
		var notes []string
		for _, e := range list.Items {
			if e.Type == corev1.EventTypeNormal && e.Regarding.UID == r.UID && e.Reason == reason {
				notes = append(notes, e.Note)
			}
		}
		assert.True(c, strings.Contains(strings.Join(notes, "\n"), part), "events %s of %s: %q", reason, r.Name, notes)
	}, testutil.Timeout, 100*time.Millisecond)
}

// eligibleSample is the case of config/samples/rbacpolicy-eligible.yaml
// (TestEachSampleAlone): the policy grants nothing by itself; alice (in
// developers) asks for an hour, bob (in leads) approves, and alice may
// edit in team-a, as the user guide shows.
func eligibleSample(t *testing.T) {
	fineGrainedArgocd(t)
	ctx := context.Background()
	applySample(t, "rbacpolicy-eligible.yaml")
	waitReason(t, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: "argocd-developers-eligible"}}, metav1.ConditionFalse, oriav1alpha1.ReasonEligible)
	eventuallyAccess(t, false, developer("create", "team-a"))
	requesters(t, "alice", "bob")
	req := accessRequest("argocd-developers-eligible", "alice", "developers", time.Hour, "INC-1234: sync stuck", "team-a")
	require.NoError(t, impersonate(t, "alice", "developers").Create(ctx, req.DeepCopy()))
	cleanup(t, req)
	waitState(t, req, oriav1alpha1.StateRequested)
	eventuallyAccess(t, false, developer("create", "team-a"))
	require.NoError(t, decide(t, impersonate(t, "bob", "leads"), req, eligibility.Approval, "bob", ""))
	waitState(t, req, oriav1alpha1.StateActive)
	eventuallyAccess(t, true, developer("create", "team-a"))
	eventuallyAccess(t, false, developer("create", "team-b"), testutil.Access{User: "carol", Groups: []string{"developers"}, Verb: "create",
		Group: "argoproj.io", Resource: "applications", Namespace: "team-a"})
}
