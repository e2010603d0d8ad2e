package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/oriaproc"
)

// An expiry during a leader takeover (issue 40, item 4): with two replicas
// and the default Lease timings (15 s), the leader is killed just before a
// grant's expiresAt. The new leader holds the Lease only some 15 s later;
// the standby replica ends the access on its own, within a second of
// expiresAt (scopeinstance/standby.go).

// standbyEarly is how long before expiresAt the leader is killed.
const standbyEarly = 500 * time.Millisecond

// standbyBound is how soon after expiresAt access must have ended.
const standbyBound = time.Second

// firstDenied polls every check by SubjectAccessReview every 100 ms until
// each is denied, and returns when each first was, after expiresAt
// (negative: before it), failing if one is allowed again later while it
// polls (until done returns true).
func firstDenied(t *testing.T, expiresAt time.Time, done func() bool, checks ...testutil.Access) []time.Duration {
	t.Helper()
	denied := make([]time.Duration, len(checks))
	seen := make([]bool, len(checks))
	deadline := time.Now().Add(testutil.Timeout)
	for time.Now().Before(deadline) {
		all := true
		for i, a := range checks {
			ok, err := testutil.Allowed(context.Background(), k8sClient, a)
			if err != nil {
				all = false
				continue
			}
			switch {
			case !ok && !seen[i]:
				denied[i], seen[i] = time.Since(expiresAt), true
			case ok && seen[i]:
				require.Failf(t, "access came back", "%s was denied %s after expiresAt and is allowed again", a, denied[i])
			}
			all = all && seen[i]
		}
		if all && done() {
			return denied
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.FailNow(t, "access did not end", "denied: %v of %v", seen, checks)
	return nil
}

// TestExpiryWhileLeaderKilledStandbyRevokes: the suite's oria makes way for
// two replicas with the default Lease timings, A (leader) and B (standby,
// serving the guard). Two grants expire at the same instant: a small one
// (its RoleBinding binds view) and a gated one (a namespace selector: its
// RoleBindings bind its gate). A is killed 0.5 s before; access to both
// ends within 1 s of expiresAt, by SubjectAccessReviews every 100 ms,
// before B leads. Once B leads it finishes: the bindings and the gate are
// deleted and both instances report Expired.
func TestExpiryWhileLeaderKilledStandbyRevokes(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns := createNamespace(t, "standby", nil)
	sel := testutil.UniqueName("standby-gated")
	gatedNS := []string{createNamespace(t, "standby-g", map[string]string{sel: "yes"}), createNamespace(t, "standby-g", map[string]string{sel: "yes"})}

	oria.Stop() // releases the Lease
	var a, b *oriaproc.Process
	t.Cleanup(func() {
		for _, p := range []*oriaproc.Process{a, b} {
			if p != nil {
				if t.Failed() {
					testutil.Tail(p.LogPath, 40)
				}
				p.Stop()
			}
		}
		oriaLog += ".standby"
		var err error
		oria, err = startOria(ctx)
		require.NoError(t, err, "the suite's oria again")
	})
	a = replica(t, "standby-a", false)
	require.Eventually(t, func() bool { return leads(a) }, testutil.Timeout, 50*time.Millisecond, "A leads")
	b = replica(t, "standby-b", true)

	expiresAt := wholeSecondsFromNow(8 * time.Second)
	small, smallAccess := handoverGrant(t, ns, testutil.UniqueName("small"), expiresAt)
	gated, gatedAccess := gatedGrant(t, sel, gatedNS, expiresAt)
	require.True(t, time.Now().Add(standbyEarly+time.Second).Before(expiresAt.Time), "the test was too slow: the grants were bound too late")
	require.False(t, leads(b), "B stands by")
	leader := leaseHolder()

	time.Sleep(time.Until(expiresAt.Add(-standbyEarly)))
	require.NoError(t, a.Cmd.Process.Kill())
	killed := time.Now()
	checks := append([]testutil.Access{smallAccess}, gatedAccess...)
	denied := firstDenied(t, expiresAt.Time, func() bool { return true }, checks...)
	tookOver := time.Duration(0)
	require.Eventually(t, func() bool {
		if holder := leaseHolder(); holder != "" && holder != leader {
			tookOver = time.Since(expiresAt.Time)
			return true
		}
		return false
	}, testutil.Timeout, 20*time.Millisecond, "B takes the Lease")
	<-a.Done()

	for i, d := range denied {
		assert.GreaterOrEqual(t, d, time.Duration(0), "%s: not denied before expiresAt", checks[i])
		assert.LessOrEqual(t, d, standbyBound, "%s: denied within %s of expiresAt while no replica leads", checks[i], standbyBound)
	}
	assert.Greater(t, tookOver, 10*time.Second, "B led only once A's Lease ran out")
	// The leader finishes: status, the gate's bindings, the gate.
	for _, si := range []*oriav1alpha1.ScopeInstance{small, gated} {
		waitReason(t, &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: si.Name}}, metav1.ConditionFalse, oriav1alpha1.ReasonExpired)
	}
	require.Eventually(t, func() bool {
		return len(gateBindings(t, small.Name)) == 0 && len(gateBindings(t, gated.Name)) == 0 && getGate(t, binding.GateName(gated.Name, string(gated.UID))) == nil
	}, testutil.Timeout, 50*time.Millisecond, "the new leader deletes the bindings and the gate")
	assert.True(t, strings.Contains(logOf(b), "ended the access of a closed window as a standby replica"), "B revoked as a standby (its log says so)")

	var parts []string
	for i, d := range denied {
		parts = append(parts, fmt.Sprintf("%s/%s %s", checks[i].User, checks[i].Namespace, d.Round(time.Millisecond)))
	}
	msg := fmt.Sprintf("leader killed %s before expiresAt, default Lease: access denied after expiresAt: %s; Lease taken over %s after expiresAt (%s after the kill)",
		standbyEarly, strings.Join(parts, ", "), tookOver.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	t.Log(msg)
	fmt.Fprintln(os.Stderr, msg)
}

// gatedGrant creates a ScopeInstance granting a new user view on pods in
// the namespaces the label sel selects (two, nss) until expiresAt (and its
// template): time-bound with a selector, it binds its gate
// (binding.Gated). It waits until the access holds in each.
func gatedGrant(t *testing.T, sel string, nss []string, expiresAt *metav1.Time) (*oriav1alpha1.ScopeInstance, []testutil.Access) {
	t.Helper()
	user := testutil.UniqueName("gated")
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("standby"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User(user))
	si := scopeInstance(tmpl.Name, tmpl.Name)
	si.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{sel: "yes"}}
	si.Spec.ExpiresAt = expiresAt
	require.True(t, binding.Gated(si.Spec), "the grant is gated")
	require.NoError(t, k8sClient.Create(context.Background(), tmpl))
	require.NoError(t, k8sClient.Create(context.Background(), si))
	cleanup(t, tmpl, si)
	var checks []testutil.Access
	for _, ns := range nss {
		checks = append(checks, testutil.Access{User: user, Verb: "list", Resource: "pods", Namespace: ns})
	}
	waitAllowed(t, true, checks...)
	gate := getGate(t, binding.GateName(si.Name, string(si.UID)))
	require.NotNil(t, gate, "the grant binds its gate")
	require.True(t, ownership.GateGrants(gate), "the gate is filled")
	return si, checks
}

// logOf returns the replica's log so far.
func logOf(p *oriaproc.Process) string {
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}
