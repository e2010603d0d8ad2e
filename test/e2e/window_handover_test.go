package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/localcluster"
	"github.com/operator-framework/oria/test/oriaproc"
)

// A leader handover at the instant of expiry (issue 32): two oria
// replicas elect a leader (short Lease timings, so that a killed leader is
// replaced in seconds); a time-bound grant expires just as its leader goes.
// Timing comes from the spec alone: the new leader revokes the grant at
// once, or, while no replica leads yet, the standby replica does
// (scopeinstance/standby.go; window_standby_test.go measures that with the
// default Lease).

// handoverLease are the leader-election timings of the replicas: a leader
// that dies without releasing the Lease is replaced after about 4 s.
var handoverLease = []string{"--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s", "--leader-election-retry-period=500ms"}

// handoverLeaseDuration is handoverLease's lease duration.
const handoverLeaseDuration = 4 * time.Second

// handoverEarly is how long before expiresAt the leader is stopped: its
// own timer for the expiry is due at expiresAt, so the revocation is the
// new leader's to make.
const handoverEarly = 100 * time.Millisecond

// leads reports whether the replica says it acquired the Lease.
func leads(p *oriaproc.Process) bool {
	b, err := os.ReadFile(p.LogPath)
	return err == nil && strings.Contains(strings.ToLower(string(b)), "successfully acquired lease")
}

// handoverReplica starts an oria replica with the suite's flags and
// handoverLease (replica).
func handoverReplica(t *testing.T, name string, guard bool) *oriaproc.Process {
	t.Helper()
	return replica(t, name, guard, handoverLease...)
}

// replica starts an oria replica with the suite's flags and the flags in
// extra (none: the default Lease timings); guard says whether it serves
// the escalation guard the API server calls (one replica at a time can:
// the address is fixed), else it serves it on a port of its own, as a
// replica behind a Service would.
func replica(t *testing.T, name string, guard bool, extra ...string) *oriaproc.Process {
	t.Helper()
	args := append(append(slices.Clone(oriaArgs), extra...), cluster.OriaFlags()...)
	if !guard {
		ports, err := localcluster.FreePorts(1)
		require.NoError(t, err)
		args = append(args, fmt.Sprintf("--webhook-port=%d", ports[0]))
	}
	p, err := oriaproc.Start(context.Background(), oriaBin, cluster.Kubeconfig, filepath.Join(workDir, name+".log"), args...)
	require.NoError(t, err, "starting replica %s", name)
	return p
}

// handoverGrant creates a ScopeInstance granting user view on pods in ns
// until expiresAt (and its template), and waits until the access holds.
func handoverGrant(t *testing.T, ns, user string, expiresAt *metav1.Time) (*oriav1alpha1.ScopeInstance, testutil.Access) {
	t.Helper()
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("handover"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User(user))
	si := scopeInstance(tmpl.Name, tmpl.Name, ns)
	si.Spec.ExpiresAt = expiresAt
	require.NoError(t, k8sClient.Create(context.Background(), tmpl))
	require.NoError(t, k8sClient.Create(context.Background(), si))
	cleanup(t, tmpl, si)
	access := testutil.Access{User: user, Verb: "list", Resource: "pods", Namespace: ns}
	waitAllowed(t, true, access)
	require.True(t, time.Now().Add(handoverEarly+time.Second).Before(expiresAt.Time), "the test was too slow: the grant was bound too late")
	return si, access
}

// leaseHolder is the holder of oria's leader-election Lease ("" when
// released or unreadable).
func leaseHolder() string {
	l := &coordinationv1.Lease{}
	if err := k8sClient.Get(context.Background(), orphanLease, l); err != nil {
		return ""
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// handover is what revokedAfter measured, each after expiresAt: when
// another replica held the Lease, when access was denied, when the
// instance's bindings were gone.
type handover struct{ took, denied, gone time.Duration }

func (h handover) String() string {
	return fmt.Sprintf("Lease taken over %s, access denied %s, bindings gone %s after expiresAt",
		h.took.Round(time.Millisecond), h.denied.Round(time.Millisecond), h.gone.Round(time.Millisecond))
}

// revokedAfter waits until another replica than leader holds the Lease,
// access is denied and the instance has no binding left, and returns how
// long after expiresAt each happened.
func revokedAfter(t *testing.T, si *oriav1alpha1.ScopeInstance, access testutil.Access, expiresAt time.Time, leader string) handover {
	t.Helper()
	var h handover
	require.Eventually(t, func() bool {
		if holder := leaseHolder(); h.took == 0 && holder != "" && holder != leader {
			h.took = time.Since(expiresAt)
		}
		if h.denied == 0 {
			if ok, err := testutil.Allowed(context.Background(), k8sClient, access); err == nil && !ok {
				h.denied = time.Since(expiresAt)
			}
		}
		if h.gone == 0 {
			var rbs metav1.PartialObjectMetadataList
			rbs.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("RoleBindingList"))
			if err := k8sClient.List(context.Background(), &rbs, client.MatchingLabels{oriav1alpha1.LabelScopeInstance: names.LabelValue(si.Name)}); err == nil && len(rbs.Items) == 0 {
				h.gone = time.Since(expiresAt)
			}
		}
		return h.took != 0 && h.denied != 0 && h.gone != 0
	}, testutil.Timeout, 20*time.Millisecond, "the expired grant %s is revoked by a new leader", si.Name)
	return h
}

// TestTimeBoundGrantLeaderHandover: the suite's oria makes way for two
// replicas, A (leader, serving the guard) and B (standby). A grant expires
// as A stops gracefully (SIGTERM, a handover: the Lease is released), then
// another as B, now leader, is killed (SIGKILL: its Lease must run out
// first, 4 s here) with a replica A2 standing by. Each time the grant is
// revoked within seconds of expiresAt (by the standby A2 before it leads,
// in the second case), which is logged; both instances end Expired, as
// the new leader reports.
func TestTimeBoundGrantLeaderHandover(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns := createNamespace(t, "handover", nil)

	oria.Stop() // releases the Lease
	var a, b, a2 *oriaproc.Process
	t.Cleanup(func() {
		for _, p := range []*oriaproc.Process{a, b, a2} {
			if p != nil {
				if t.Failed() {
					testutil.Tail(p.LogPath, 40)
				}
				p.Stop()
			}
		}
		oriaLog += ".handover"
		var err error
		oria, err = startOria(ctx)
		require.NoError(t, err, "the suite's oria again")
	})
	began := time.Now()
	a = handoverReplica(t, "handover-a", true)
	require.Eventually(t, func() bool { return leads(a) }, testutil.Timeout, 50*time.Millisecond, "A leads")
	b = handoverReplica(t, "handover-b", false)
	t.Logf("two replicas up in %s", time.Since(began).Round(time.Millisecond))

	// A grant expires as A stops gracefully.
	first := wholeSecondsFromNow(6 * time.Second)
	si1, access1 := handoverGrant(t, ns, testutil.UniqueName("graceful"), first)
	require.False(t, leads(b), "B stands by")
	leader := leaseHolder()
	time.Sleep(time.Until(first.Add(-handoverEarly)))
	require.NoError(t, a.Cmd.Process.Signal(syscall.SIGTERM))
	h1 := revokedAfter(t, si1, access1, first.Time, leader)
	<-a.Done()
	// The standby may have revoked before B leads: wait for the takeover.
	assert.Eventually(t, func() bool { return leads(b) }, handoverLeaseDuration+10*time.Second, 100*time.Millisecond, "B took over")
	assert.Less(t, h1.denied, 5*time.Second, "a graceful handover: revoked within seconds of expiresAt")
	graceful := fmt.Sprintf("graceful stop (SIGTERM) %s before expiresAt: %s", handoverEarly, h1)

	// Another expires as B, now leader, is killed; A2 stands by and serves
	// the guard (A did).
	a2 = handoverReplica(t, "handover-a2", true)
	second := wholeSecondsFromNow(6 * time.Second)
	si2, access2 := handoverGrant(t, ns, testutil.UniqueName("killed"), second)
	require.False(t, leads(a2), "A2 stands by")
	leader = leaseHolder()
	time.Sleep(time.Until(second.Add(-handoverEarly)))
	require.NoError(t, b.Cmd.Process.Kill())
	h2 := revokedAfter(t, si2, access2, second.Time, leader)
	<-b.Done()
	// The standby may have revoked before A2 leads: wait for the takeover.
	assert.Eventually(t, func() bool { return leads(a2) }, handoverLeaseDuration+10*time.Second, 100*time.Millisecond, "A2 took over")
	assert.Less(t, h2.denied, handoverLeaseDuration+5*time.Second, "a killed leader: revoked within seconds of the Lease running out")
	killed := fmt.Sprintf("leader killed (SIGKILL) %s before expiresAt, Lease duration %s: %s", handoverEarly, handoverLeaseDuration, h2)

	for _, si := range []*oriav1alpha1.ScopeInstance{si1, si2} {
		waitReason(t, &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: si.Name}}, metav1.ConditionFalse, oriav1alpha1.ReasonExpired)
	}
	msg := "leader handover at expiry: " + graceful + "; " + killed
	t.Log(msg)
	fmt.Fprintln(os.Stderr, msg)
}
