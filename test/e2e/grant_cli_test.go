package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

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

// The break-glass commands (issue 32): kubectl oria grant creates a
// time-bound RBACPolicy through the API server (the guard applies), after
// printing its plan; kubectl oria revoke ends it at once, keeping the
// policy as the record. Access is checked with SubjectAccessReviews.

// getPolicy reads the named RBACPolicy as admin.
func getPolicy(t require.TestingT, name string) *oriav1alpha1.RBACPolicy {
	p := &oriav1alpha1.RBACPolicy{}
	require.NoError(t, k8sClient.Get(context.Background(), client.ObjectKey{Name: name}, p))
	return p
}

// grantOf is the status report's entry for the named grant.
func grantOf(t *testing.T, ext, kind, name string) cli.Grant {
	t.Helper()
	var report cli.StatusReport
	require.NoError(t, json.Unmarshal([]byte(kubectlOria(t, "status", ext, "-o", "json")), &report))
	require.Len(t, report.Extensions, 1)
	for _, g := range report.Extensions[0].Grants {
		if g.Kind == kind && g.Name == name {
			return g
		}
	}
	t.Fatalf("kubectl oria status %s: no %s %s", ext, kind, name)
	return cli.Grant{}
}

// TestKubectlOriaGrantRevoke: an admin's break-glass grant of edit for two
// hours: --dry-run=server plans it and creates nothing; grant prints the
// plan and creates it, with its reason; the user gets access; status,
// access and can show until when and how long is left, a pending grant
// is listed as such; revoke ends it (SubjectAccessReviews deny within a
// second or two), and the policy stays, Expired; revoke --delete deletes
// it.
func TestKubectlOriaGrantRevoke(t *testing.T) {
	testutil.NeedCluster(t)
	ns := createNamespace(t, "grant", nil)
	crd := extensionWithAPI(t, oriav1alpha1.RBACModeFineGrained)
	group, plural, ext := crd.Spec.Group, crd.Spec.Names.Plural, crd.Labels[oriav1alpha1.LabelOLMOwnerName]
	waitExtensionCondition(t, ext, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
	user, name := testutil.UniqueName("breakglass"), testutil.UniqueName("grant")
	create := testutil.Access{User: user, Verb: "create", Group: group, Resource: plural, Namespace: ns}
	require.False(t, can(t, create))
	grantArgs := []string{"grant", user, "--extension", ext, "--access", "edit", "-n", ns, "--for", "2h", "--reason", "INC-1234: sync stuck", "--name", name}
	cleanup(t, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}})

	out := kubectlOria(t, append(grantArgs, "--dry-run=server")...)
	assert.Contains(t, out, "RBACPolicy "+name+" (create): admitted")
	assert.Contains(t, out, "rbacpolicy.oria.operatorframework.io/"+name+" created (server dry run)")
	assert.True(t, apierrors.IsNotFound(k8sClient.Get(context.Background(), client.ObjectKey{Name: name}, &oriav1alpha1.RBACPolicy{})),
		"a server dry run creates nothing")

	started := time.Now()
	out = kubectlOria(t, grantArgs...)
	t.Logf("kubectl oria grant:\n%s", out)
	for _, want := range []string{
		"RBACPolicy " + name + " (create): admitted",
		"ScopeTemplate rbacpolicy-" + name, "subjects: User " + user,
		"is time-bound: it grants until ", "oria deletes its bindings then",
		"create", "RoleBinding",
		"rbacpolicy.oria.operatorframework.io/" + name + " granted: edit on " + crd.Name + " for User " + user + " in 1 namespace: " + ns + ", until ",
	} {
		assert.Contains(t, out, want)
	}
	granted := waitAllowed(t, true, create)
	t.Logf("kubectl oria grant: access %s after the command started", granted.Sub(started).Round(time.Millisecond))
	p := getPolicy(t, name)
	assert.Equal(t, "INC-1234: sync stuck", p.Annotations[oriav1alpha1.AnnotationReason])
	assert.Nil(t, p.Spec.NotBefore, "a grant starts at once")
	require.NotNil(t, p.Spec.ExpiresAt)
	assert.WithinDuration(t, started.Add(2*time.Hour), p.Spec.ExpiresAt.Time, time.Minute)
	waitReason(t, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.ConditionTrue, oriav1alpha1.ReasonBound)

	// revoke completes the policy's name, with its window.
	completions, _, err := runPlugin(t, "", "__complete", "revoke", name[:len(name)-2])
	require.NoError(t, err)
	assert.Contains(t, completions, name+"\tuntil ")

	// A pending grant, for access to list as such.
	later := testutil.UniqueName("later")
	pending := &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("pending")}, Spec: oriav1alpha1.RBACPolicySpec{
		ExtensionName: ext, Access: oriav1alpha1.AccessView, Namespaces: []string{ns}, Subjects: []rbacv1.Subject{testutil.User(later)},
		NotBefore: wholeSecondsFromNow(time.Hour), ExpiresAt: wholeSecondsFromNow(2 * time.Hour)}}
	testutil.Create(t, k8sClient, pending)

	// status, access and can: the window and the time left.
	g := grantOf(t, ext, "RBACPolicy", name)
	require.NotNil(t, g.Window, "status: the grant's window")
	assert.Equal(t, cli.WindowActive, g.Window.State)
	assert.True(t, g.Window.ExpiresAt.Equal(p.Spec.ExpiresAt), "status: until %v, want %v", g.Window.ExpiresAt, p.Spec.ExpiresAt)
	assert.Contains(t, []string{"2h", "119m", "118m"}, g.Window.TimeLeft)
	assert.Contains(t, kubectlOria(t, "status", ext), "left)")
	rows := accessRows(t, ext, "-n", ns)
	var row *cli.AccessRow
	for i := range rows {
		if rows[i].Subject == "User "+user {
			row = &rows[i]
		}
	}
	require.NotNil(t, row, "access: a row for %s in %+v", user, rows)
	assert.True(t, row.ExpiresAt.Equal(p.Spec.ExpiresAt), "access: the row ends at %v, want %v", row.ExpiresAt, p.Spec.ExpiresAt)
	assert.Contains(t, strings.Join(row.Via, "; "), "RBACPolicy "+name+" (until ")
	table := kubectlOria(t, "access", ext, "-n", ns)
	t.Logf("kubectl oria access:\n%s", table)
	assert.Contains(t, table, "Pending (not in force yet")
	assert.Contains(t, table, "RBACPolicy "+pending.Name+": view for User "+later)
	var canReport cli.CanReport
	require.NoError(t, json.Unmarshal([]byte(kubectlOria(t, "can", user, "--extension", ext, "-o", "json")), &canReport))
	require.NotEmpty(t, canReport.Access)
	for _, r := range canReport.Access {
		assert.True(t, r.ExpiresAt.Equal(p.Spec.ExpiresAt), "can: %s ends at %v, want %v", r.API, r.ExpiresAt, p.Spec.ExpiresAt)
	}
	assert.Contains(t, kubectlOria(t, "can", user, "--extension", ext), "left)")

	// revoke: access ends at once; the policy stays, Expired.
	started = time.Now()
	out = kubectlOria(t, "revoke", name)
	denied := waitAllowed(t, false, create)
	t.Logf("kubectl oria revoke: %q; access denied %s after the command started", strings.TrimSpace(out), denied.Sub(started).Round(time.Millisecond))
	assert.Less(t, denied.Sub(started), windowJitter, "revoked within a second or two")
	assert.Contains(t, out, "rbacpolicy.oria.operatorframework.io/"+name+" revoked: spec.expiresAt ")
	assert.Contains(t, out, "Expired, its bindings deleted")
	waitReason(t, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.ConditionFalse, oriav1alpha1.ReasonExpired)
	p = getPolicy(t, name)
	assert.Equal(t, "INC-1234: sync stuck", p.Annotations[oriav1alpha1.AnnotationReason], "the record keeps the reason")
	assert.Equal(t, cli.WindowExpired, grantOf(t, ext, "RBACPolicy", name).Window.State)
	assert.Contains(t, kubectlOria(t, "revoke", name), "unchanged: the grant expired at ")

	// revoke --delete: the record goes.
	kubectlOria(t, "revoke", "rbacpolicy/"+name, "--delete")
	gone(t, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// TestKubectlOriaGrantDelegated: a delegated user D, who holds view on an
// extension's API in their own namespace through an admin's time-bound
// grant, grants view there with kubectl oria grant (admitted: D could bind
// it by hand); edit there, or view in a namespace where D holds nothing,
// is refused by the guard: grant prints the refusal, exits 2 and creates
// nothing. D then ends their own grant early with kubectl oria revoke (a
// narrowing: admitted), and loses the access.
func TestKubectlOriaGrantDelegated(t *testing.T) {
	testutil.NeedCluster(t)
	d, own, _ := sequenceUser(t, "granter")
	victim := createNamespace(t, "victim", nil)
	crd := extensionWithAPI(t, oriav1alpha1.RBACModeFineGrained)
	group, plural, ext := crd.Spec.Group, crd.Spec.Names.Plural, crd.Labels[oriav1alpha1.LabelOLMOwnerName]
	adminGrant := adminPolicy(t, group, plural, ext, oriav1alpha1.AccessView, d, own)
	update(t, adminGrant, func() { adminGrant.Spec.ExpiresAt = wholeSecondsFromNow(time.Hour) })
	list := func(user, ns string) testutil.Access {
		return testutil.Access{User: user, Verb: "list", Group: group, Resource: plural, Namespace: ns}
	}
	waitAllowed(t, true, list(d, own))

	friend := testutil.UniqueName("friend")
	grantAs := func(name, access, ns string) (string, string, error) {
		cleanup(t, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}})
		// The API listed: a grant of every API of the extension, those a
		// later version adds included, needs bind.
		return runPlugin(t, "", "grant", friend, "--extension", ext, "--api", plural+"."+group, "--access", access, "-n", ns, "--for", "1h",
			"--name", name, "--as", d)
	}
	within := testutil.UniqueName("within")
	out, stderr, err := grantAs(within, "view", own)
	require.NoError(t, err, "D grants what D holds: %s%s", out, stderr)
	assert.Contains(t, out, "RBACPolicy "+within+" (create): admitted")
	waitAllowed(t, true, list(friend, own))

	for _, tc := range []struct{ access, ns, why string }{
		{"edit", own, "beyond the view D holds"},
		{"view", victim, "where D holds nothing"},
	} {
		name := testutil.UniqueName("beyond")
		out, stderr, err := grantAs(name, tc.access, tc.ns)
		t.Logf("D grants %s in %s (%s): exit %d\n%s%s", tc.access, tc.ns, tc.why, exitCode(err), out, stderr)
		assert.Equal(t, cli.ExitNo, exitCode(err), "refused: exit 2")
		assert.Contains(t, out, "RBACPolicy "+name+" (create): REFUSED: ")
		assert.Contains(t, out, guardDenied)
		assert.Contains(t, stderr, "REFUSED: not created")
		assert.True(t, apierrors.IsNotFound(k8sClient.Get(context.Background(), client.ObjectKey{Name: name}, &oriav1alpha1.RBACPolicy{})),
			"a refused grant is not created")
	}
	assert.False(t, can(t, testutil.Access{User: friend, Verb: "create", Group: group, Resource: plural, Namespace: own}))
	assert.False(t, can(t, list(friend, victim)))

	// D ends the admin's grant to D early: a narrowing, admitted.
	out, stderr, err = runPlugin(t, "", "revoke", adminGrant.Name, "--as", d)
	require.NoError(t, err, "D ends their own grant: %s%s", out, stderr)
	t.Logf("D: kubectl oria revoke: %s", strings.TrimSpace(out))
	waitAllowed(t, false, list(d, own))
	waitReason(t, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: adminGrant.Name}}, metav1.ConditionFalse, oriav1alpha1.ReasonExpired)
}
