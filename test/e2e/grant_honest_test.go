package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/cli"
	"github.com/operator-framework/oria/internal/testutil"
)

// Issue 42: kubectl oria grant never says yes to a grant of nothing, waits
// for Bound, and the who/when/why of a grant and of its revocation is
// kept on the policy (the guard keeps it true) and shown by status.

// whoAmI is the admin's user name, as the API server authenticates it.
func whoAmI(t *testing.T) string {
	t.Helper()
	r := &authenticationv1.SelfSubjectReview{}
	require.NoError(t, k8sClient.Create(context.Background(), r))
	return r.Status.UserInfo.Username
}

// policyEvents returns the messages of the events oria recorded on the
// named RBACPolicy with reason.
func policyEvents(t require.TestingT, name, reason string) []string {
	var list eventsv1.EventList
	require.NoError(t, k8sClient.List(context.Background(), &list))
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "RBACPolicy" && e.Regarding.Name == name && e.Reason == reason {
			out = append(out, e.Note)
		}
	}
	return out
}

// TestKubectlOriaGrantHonest: each grant of nothing (a typo'd extension,
// an Unmanaged one, an unknown --api, a cluster-scoped API with -n, no
// namespace that exists) is refused with exit code 2 and creates nothing;
// a real grant returns once it is Bound (a SubjectAccessReview allows at
// once), a namespaced and a cluster-wide one; --for 1w is taken, 400d
// refused.
func TestKubectlOriaGrantHonest(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns := createNamespace(t, "honest", nil)
	crd := extensionWithAPI(t, oriav1alpha1.RBACModeFineGrained)
	group, plural, ext := crd.Spec.Group, crd.Spec.Names.Plural, crd.Labels[oriav1alpha1.LabelOLMOwnerName]
	cluster := testutil.CRD(group, "clusterwidgets", "ClusterWidget", ext)
	cluster.Spec.Scope = apiextensionsv1.ClusterScoped
	require.NoError(t, k8sClient.Create(ctx, cluster))
	cleanup(t, cluster)
	unmanaged := testutil.ClusterExtension(testutil.UniqueName("unmanaged"), oriav1alpha1.RBACModeUnmanaged)
	unmanagedCRD := testutil.CRD(testutil.UniqueName("unmanaged")+".example.com", "things", "Thing", unmanaged.Name)
	for _, o := range []client.Object{unmanaged, unmanagedCRD} {
		require.NoError(t, k8sClient.Create(ctx, o))
	}
	cleanup(t, unmanaged, unmanagedCRD)
	waitExtensionCondition(t, ext, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
	user := testutil.UniqueName("honest")

	for _, tc := range []struct {
		name string
		args []string
		why  string
	}{
		{"a typo'd extension", []string{"--extension", ext + "d", "-n", ns}, fmt.Sprintf("ClusterExtension %q does not exist", ext+"d")},
		{"an Unmanaged extension", []string{"--extension", unmanaged.Name, "-n", ns}, "is in Unmanaged mode: oria grants nothing for it"},
		{"an unknown --api", []string{"--extension", ext, "--api", strings.TrimSuffix(plural, "s") + "." + group, "-n", ns},
			fmt.Sprintf("provides no API %s; its APIs: ", strings.TrimSuffix(plural, "s")+"."+group)},
		{"a cluster-scoped API with -n", []string{"--extension", ext, "--api", cluster.Name, "-n", ns},
			cluster.Name + " is cluster-scoped: a RoleBinding in a namespace cannot grant it; grant it cluster-wide (--all-namespaces --api " + cluster.Name},
		{"no namespace that exists", []string{"--extension", ext, "-n", "nowhere-" + strings.ToLower(testutil.UniqueName("x"))}, "no namespace of -n exists"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := testutil.UniqueName("nothing")
			cleanup(t, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}})
			out, stderr, err := runPlugin(t, "", append([]string{"grant", user, "--access", "view", "--for", "1h", "--name", name}, tc.args...)...)
			t.Logf("%s: exit %d\n%s%s", tc.name, exitCode(err), out, stderr)
			assert.Equal(t, cli.ExitNo, exitCode(err), "refused: exit 2")
			assert.Contains(t, stderr, "RBACPolicy "+name+" REFUSED: not created: it would grant nothing: ")
			assert.Contains(t, stderr, tc.why)
			assert.NotContains(t, out, "created")
			assert.True(t, apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Name: name}, &oriav1alpha1.RBACPolicy{})), "nothing created")
		})
	}

	// Granted: the command returns once oria reports Bound, so access holds
	// when it does.
	name := testutil.UniqueName("granted")
	cleanup(t, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}})
	started := time.Now()
	out := kubectlOria(t, "grant", user, "--extension", ext, "--api", crd.Name, "--access", "edit", "-n", ns, "--for", "1w", "--name", name)
	took := time.Since(started)
	create := testutil.Access{User: user, Verb: "create", Group: group, Resource: plural, Namespace: ns}
	assert.True(t, can(t, create), "access holds when grant returns")
	t.Logf("kubectl oria grant, waiting for Bound: %s\n%s", took.Round(time.Millisecond), out)
	assert.Contains(t, out, "rbacpolicy.oria.operatorframework.io/"+name+" granted: edit on "+crd.Name+" for User "+user+" in 1 namespace: "+ns+", until ")
	assert.Contains(t, out, "; Bound ")
	assert.WithinDuration(t, started.Add(7*24*time.Hour), getPolicy(t, name).Spec.ExpiresAt.Time, time.Minute)

	// Every API in a namespace, one of them cluster-scoped: granted in
	// part, and said so.
	mixed, other := testutil.UniqueName("mixed"), testutil.UniqueName("other")
	cleanup(t, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: mixed}})
	out, stderr, err := runPlugin(t, "", "grant", other, "--extension", ext, "--access", "view", "-n", ns, "--for", "1h", "--name", mixed)
	t.Logf("a namespaced and a cluster-scoped API in a namespace:\n%s%s", out, stderr)
	require.NoError(t, err)
	assert.True(t, can(t, testutil.Access{User: other, Verb: "list", Group: group, Resource: plural, Namespace: ns}), "access holds when grant returns")
	assert.False(t, can(t, testutil.Access{User: other, Verb: "list", Group: group, Resource: "clusterwidgets"}))
	assert.Contains(t, stderr, "Note: "+cluster.Name+" is cluster-scoped: a RoleBinding in a namespace cannot grant it, so it is left out")
	assert.Contains(t, out, "rbacpolicy.oria.operatorframework.io/"+mixed+" granted in part: view on "+crd.Name+" for User "+other+" in 1 namespace: "+ns+", until ")
	assert.Contains(t, out, "; NOT all of it: ClusterScopedAPI: ")

	// Cluster-wide, for the cluster-scoped API.
	wide := testutil.UniqueName("granted-wide")
	cleanup(t, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: wide}})
	out = kubectlOria(t, "grant", user, "--extension", ext, "--api", cluster.Name, "--access", "view", "-A", "--for", "2h", "--name", wide)
	assert.True(t, can(t, testutil.Access{User: user, Verb: "list", Group: group, Resource: "clusterwidgets"}), "access holds when grant returns")
	assert.Contains(t, out, "rbacpolicy.oria.operatorframework.io/"+wide+" granted: view on "+cluster.Name+" for User "+user+" cluster-wide, until ")

	// --wait=false returns at once, with what was created.
	quick := testutil.UniqueName("quick")
	cleanup(t, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: quick}})
	out = kubectlOria(t, "grant", user, "--extension", ext, "--access", "view", "-n", ns, "--for", "2h", "--name", quick, "--wait=false")
	assert.Contains(t, out, "rbacpolicy.oria.operatorframework.io/"+quick+" created: view on "+ext+"'s APIs")

	// Too long.
	_, stderr, err = runPlugin(t, "", "grant", user, "--extension", ext, "--access", "view", "-n", ns, "--for", "400d")
	assert.Equal(t, cli.ExitError, exitCode(err))
	assert.Contains(t, stderr, "at most 90 days")
}

// TestKubectlOriaGrantRecord: who granted, when and why, and who revoked,
// when and why, as kubectl oria grant and revoke record them, shown by
// status and access and named in oria's events; a user who may only patch
// the policy cannot change who is recorded (the guard, on the real API
// server, refuses); revoke ends a standing grant only with --permanent.
func TestKubectlOriaGrantRecord(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns := createNamespace(t, "record", nil)
	crd := extensionWithAPI(t, oriav1alpha1.RBACModeFineGrained)
	group, plural, ext := crd.Spec.Group, crd.Spec.Names.Plural, crd.Labels[oriav1alpha1.LabelOLMOwnerName]
	waitExtensionCondition(t, ext, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
	admin, user, name := whoAmI(t), testutil.UniqueName("recorded"), testutil.UniqueName("grant")
	cleanup(t, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}})
	before := time.Now().Truncate(time.Second)
	kubectlOria(t, "grant", user, "--extension", ext, "--access", "edit", "-n", ns, "--for", "2h", "--reason", "INC-42: sync stuck", "--name", name)
	after := time.Now()

	p := getPolicy(t, name)
	assert.Equal(t, admin, p.Annotations[oriav1alpha1.AnnotationGrantedBy])
	g := grantOf(t, ext, "RBACPolicy", name)
	require.NotNil(t, g.Granted, "status: the record of the grant")
	assert.Equal(t, admin, g.Granted.By)
	assert.Equal(t, "INC-42: sync stuck", g.Granted.Reason)
	at, err := time.Parse(time.RFC3339, g.Granted.At)
	require.NoError(t, err)
	assert.False(t, at.Before(before) || at.After(after), "granted at %v, while the command ran (%v to %v)", at, before, after)
	assert.Contains(t, kubectlOria(t, "status", ext), fmt.Sprintf(`granted by %q at %s: INC-42: sync stuck`, admin, g.Granted.At))
	assert.Contains(t, kubectlOria(t, "access", ext, "-n", ns), fmt.Sprintf("RBACPolicy %s (until ", name))
	assert.Contains(t, kubectlOria(t, "access", ext, "-n", ns), fmt.Sprintf("granted by %q", admin))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, strings.Join(policyEvents(c, name, "Granted"), "\n"), fmt.Sprintf(`edit access granted by %q at %s: INC-42: sync stuck`, admin, g.Granted.At))
	}, testutil.Timeout, testutil.Interval)

	// A user who may only patch (and get) policies: the record of who is
	// not theirs to write.
	mallory, _, asMallory := sequenceUser(t, "mallory")
	forge := func(annotations map[string]any) error {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
		require.NoError(t, err)
		return asMallory.Patch(ctx, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, patch))
	}
	now := time.Now().UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		name        string
		annotations map[string]any
		why         string
	}{
		{"granted-by changed", map[string]any{oriav1alpha1.AnnotationGrantedBy: mallory}, "is written when the object is created, and never changed"},
		{"granted-by removed", map[string]any{oriav1alpha1.AnnotationGrantedBy: nil}, "is written when the object is created, and never changed"},
		{"granted-at changed", map[string]any{oriav1alpha1.AnnotationGrantedAt: now}, "is written when the object is created, and never changed"},
		{"the granter's reason changed", map[string]any{oriav1alpha1.AnnotationReason: "mallory's reason"}, fmt.Sprintf("the reason %q gave for the grant", admin)},
		{"a revocation in someone else's name", map[string]any{oriav1alpha1.AnnotationRevokedBy: admin, oriav1alpha1.AnnotationRevokedAt: now},
			fmt.Sprintf("says %q, but the request is made by %q", admin, mallory)},
	} {
		err := forge(tc.annotations)
		t.Logf("%s: %v", tc.name, err)
		refused(t, err, tc.why)
	}
	require.NoError(t, forge(map[string]any{"team": "a"}), "an unrelated annotation is admitted")
	assert.Equal(t, admin, getPolicy(t, name).Annotations[oriav1alpha1.AnnotationGrantedBy], "the record stands")

	// revoke records who revoked, when and why; the grant ends.
	create := testutil.Access{User: user, Verb: "create", Group: group, Resource: plural, Namespace: ns}
	require.True(t, can(t, create))
	kubectlOria(t, "revoke", name, "--reason", "INC-42 resolved")
	assert.False(t, can(t, create), "access ends when revoke returns")
	g = grantOf(t, ext, "RBACPolicy", name)
	require.NotNil(t, g.Revoked, "status: the record of the revocation")
	assert.Equal(t, admin, g.Revoked.By)
	assert.Equal(t, "INC-42 resolved", g.Revoked.Reason)
	require.NotNil(t, g.Granted, "the grant's record stays")
	assert.Equal(t, "INC-42: sync stuck", g.Granted.Reason)
	table := kubectlOria(t, "status", ext)
	t.Logf("kubectl oria status:\n%s", table)
	assert.Contains(t, table, fmt.Sprintf(`revoked by %q at %s: INC-42 resolved`, admin, g.Revoked.At))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, strings.Join(policyEvents(c, name, "Revoked"), "\n"), fmt.Sprintf(`revoked by %q at %s: INC-42 resolved`, admin, g.Revoked.At))
	}, testutil.Timeout, testutil.Interval)
	// Nor may mallory rewrite the revocation's reason, or remove it.
	refused(t, forge(map[string]any{oriav1alpha1.AnnotationRevokeReason: "forged"}), fmt.Sprintf("says %q, but the request is made by %q", admin, mallory))
	refused(t, forge(map[string]any{oriav1alpha1.AnnotationRevokedBy: nil, oriav1alpha1.AnnotationRevokedAt: nil, oriav1alpha1.AnnotationRevokeReason: nil}),
		"is written whole by whoever revokes, and never removed")

	// A standing grant: revoke says so, and ends it only with --permanent.
	standing := policy(t, ext, oriav1alpha1.AccessView, testutil.User(user), ns)
	list := testutil.Access{User: user, Verb: "list", Group: group, Resource: plural, Namespace: ns}
	waitAllowed(t, true, list)
	out, stderr, err := runPlugin(t, "", "revoke", standing)
	assert.Equal(t, cli.ExitNo, exitCode(err), "%s%s", out, stderr)
	assert.Contains(t, stderr, "is a standing grant (no spec.expiresAt), not a time-bound one: revoke ends it for good only with --permanent")
	assert.Nil(t, getPolicy(t, standing).Spec.ExpiresAt, "unchanged")
	assert.True(t, can(t, list))
	kubectlOria(t, "revoke", standing, "--permanent")
	assert.False(t, can(t, list))
}

// TestRBACPolicyRecordOnCreate: the guard refuses a policy created with a
// record naming someone else, for anyone, and admits the requester's own.
func TestRBACPolicyRecordOnCreate(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	admin := whoAmI(t)
	p := &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("forged"), Annotations: map[string]string{
		oriav1alpha1.AnnotationGrantedBy: "someone-else", oriav1alpha1.AnnotationGrantedAt: time.Now().UTC().Format(time.RFC3339)}},
		Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: "any", Access: oriav1alpha1.AccessView, Namespaces: []string{"default"},
			Subjects: []rbacv1.Subject{testutil.User("x")}}}
	refused(t, k8sClient.Create(ctx, p.DeepCopy()), fmt.Sprintf(`says "someone-else", but the request is made by %q`, admin))
	p.Annotations[oriav1alpha1.AnnotationGrantedBy] = admin
	testutil.Create(t, k8sClient, p)
}
