package install

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/manager"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/localcluster"
	"github.com/operator-framework/oria/test/oriaproc"
)

// The fan-out the leader is killed in the middle of: haInstances
// ScopeInstances over the same haNamespaces namespaces.
const (
	haNamespaces = 1000
	haInstances  = 4
)

// TestHighAvailability runs the install's two replicas behind one address,
// as its Service does (a TCP proxy that skips a replica that refuses
// connections, as endpoints drop a pod that is gone), and checks what the
// issue asks of them:
//   - the leader is killed (SIGKILL, no Lease release) in the middle of a
//     fan-out; the other takes over once the Lease expires and converges to
//     the exact state: every binding, no other, every instance Bound;
//   - admission keeps working while one replica is down, before the
//     takeover too: every replica serves the guard, leader or not;
//   - a graceful stop (SIGTERM) hands over in seconds: the Lease is
//     released at once;
//   - every replica serves the same certificate, its Secret's (oria makes
//     it: --cert-management=internal), before and after each takeover.
//
// It prints the seconds each takeover took.
func TestHighAvailability(t *testing.T) {
	testutil.NeedCluster(t)
	d, _ := deployment(t)
	ports, err := localcluster.FreePorts(2)
	require.NoError(t, err)
	proxy := startProxy(t, fmt.Sprintf("%s:%d", webhookHost, webhookPort),
		fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1]))
	lease := client.ObjectKey{Namespace: d.Namespace, Name: manager.LeaderElectionID}
	start := func(name string, port int) *oriaproc.Process {
		return startAsDeployment(t, serviceAccountKubeconfig(t), replica{name: name, webhookPort: port})
	}

	var a, b *oriaproc.Process
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range []*oriaproc.Process{a, b} {
				if p != nil {
					tail(t, p.LogPath)
				}
			}
		}
	})
	a = start("replica-a", ports[0])
	first := waitHolder(t, lease, "")
	requireLeader(t, a)
	b = start("replica-b", ports[1])
	shared := waitServing(t, ports, nil)
	same := func(c *assert.CollectT, s serving) {
		assert.Equal(c, shared.uid, s.uid, "the same Secret")
		assert.Equal(c, string(shared.cert), string(s.cert), "the same certificate")
	}

	// The fan-out.
	sel := testutil.UniqueName("ha")
	nsNames := createNamespaces(t, sel, haNamespaces)
	testutil.Create(t, k8sClient, testutil.ScopeTemplate(sel, []oriav1alpha1.ClusterRoleTemplate{{Name: sel, Rules: testutil.PodReaderRules()}},
		rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: sel}))
	var instances []*oriav1alpha1.ScopeInstance
	for i := range haInstances {
		si := &oriav1alpha1.ScopeInstance{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", sel, i)},
			Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: sel,
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{sel: "true"}}},
		}
		testutil.Create(t, k8sClient, si)
		instances = append(instances, si)
	}
	total := haNamespaces * haInstances
	var atKill int
	require.Eventually(t, func() bool {
		atKill = countBindings(t, instances)
		return atKill >= total/10
	}, time.Minute, 20*time.Millisecond, "the fan-out started")

	// Kill the leader mid-fan-out.
	killed := time.Now()
	require.NoError(t, a.Cmd.Process.Kill())
	<-a.Done()
	t.Logf("killed the leader with %d of %d RoleBindings written", atKill, total)
	require.Less(t, atKill, total, "the leader was killed before the fan-out ended (raise haNamespaces)")
	admitted := admissionWorks(t, sel+"-during-kill")
	after := waitHolder(t, lease, first)
	killTakeover := time.Since(killed)
	assert.Less(t, admitted.Sub(killed), killTakeover, "the guard answered before the takeover: it does not depend on the leader")
	requireLeader(t, b)
	waitServing(t, ports[1:], same)
	waitExact(t, instances, nsNames)

	// A graceful stop: the new leader releases the Lease at once.
	a = start("replica-a-again", ports[0])
	waitServing(t, ports, same)
	stopped := time.Now()
	require.NoError(t, b.Cmd.Process.Signal(syscall.SIGTERM))
	admissionWorks(t, sel+"-during-stop")
	released := waitHolder(t, lease, after)
	gracefulTakeover := time.Since(stopped)
	require.NotEqual(t, after, released)
	requireLeader(t, a)
	<-b.Done()
	waitServing(t, ports[:1], same)
	assert.Less(t, gracefulTakeover, 10*time.Second, "a graceful stop hands over within seconds")
	t.Logf("webhook connections: %d went past a replica that was down", proxy.failovers())

	msg := fmt.Sprintf("HA: a killed leader was replaced after %.1f s (lease duration %v); a graceful stop handed over in %.1f s (Lease released after %.1f s)",
		killTakeover.Seconds(), manager.DefaultLeaseDuration, gracefulTakeover.Seconds(), releasedAfter.Seconds())
	t.Log(msg)
	fmt.Fprintln(os.Stderr, msg)
	for _, p := range []*oriaproc.Process{a, b} {
		requireNoForbidden(t, p.LogPath)
	}
}

// releasedAfter is how long after the last waitHolder began the Lease was
// first seen without a holder (0: never).
var releasedAfter time.Duration

// waitHolder waits until the Lease has a holder other than previous, and
// returns it.
func waitHolder(t *testing.T, key client.ObjectKey, previous string) string {
	t.Helper()
	var holder string
	began := time.Now()
	releasedAfter = 0
	require.Eventually(t, func() bool {
		l := &coordinationv1.Lease{}
		if err := k8sClient.Get(context.Background(), key, l); err != nil {
			return false
		}
		holder = ptr.Deref(l.Spec.HolderIdentity, "")
		if holder == "" && releasedAfter == 0 {
			releasedAfter = time.Since(began)
		}
		return holder != "" && holder != previous
	}, time.Minute, 20*time.Millisecond, "a new holder of Lease %s (was %q)", key, previous)
	return holder
}

// requireLeader checks that p says it acquired the Lease.
func requireLeader(t *testing.T, p *oriaproc.Process) {
	t.Helper()
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(p.LogPath)
		return err == nil && strings.Contains(strings.ToLower(string(b)), "successfully acquired lease")
	}, 10*time.Second, 50*time.Millisecond, "%s leads", p.LogPath)
}

// admissionWorks creates a ScopeTemplate (which the guard must admit) and
// returns when it was admitted. The first request may reach the replica
// that just went away through a connection the API server kept; it retries
// for a few seconds, as kubectl users and GitOps tools do.
func admissionWorks(t *testing.T, name string) time.Time {
	t.Helper()
	tmpl := testutil.ScopeTemplate(name, []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name})
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err = k8sClient.Create(context.Background(), tmpl.DeepCopy()); err == nil {
			t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), tmpl) })
			return time.Now()
		}
		t.Logf("admission while a replica is down: %v", err)
	}
	require.NoError(t, err, "admission while a replica is down")
	return time.Time{}
}

// createNamespaces creates n namespaces labelled sel=true, 32 at a time.
func createNamespaces(t *testing.T, sel string, n int) []string {
	t.Helper()
	out := make([]string, n)
	var g errgroup.Group
	g.SetLimit(32)
	for i := range n {
		out[i] = fmt.Sprintf("%s-%04d", sel, i)
		g.Go(func() error {
			return k8sClient.Create(context.Background(), testutil.Namespace(out[i], map[string]string{sel: "true"}))
		})
	}
	require.NoError(t, g.Wait())
	return out
}

// countBindings counts the RoleBindings of the instances (metadata only).
func countBindings(t require.TestingT, instances []*oriav1alpha1.ScopeInstance) int {
	var values []string
	for _, si := range instances {
		values = append(values, names.LabelValue(si.Name))
	}
	req, err := labels.NewRequirement(oriav1alpha1.LabelScopeInstance, selection.In, values)
	require.NoError(t, err)
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("RoleBindingList"))
	require.NoError(t, k8sClient.List(context.Background(), list, client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*req)}))
	return len(list.Items)
}

// waitExact waits until every instance has exactly one RoleBinding in each
// namespace, and says so: Ready=True, Bound, every namespace listed.
func waitExact(t *testing.T, instances []*oriav1alpha1.ScopeInstance, namespaces []string) {
	t.Helper()
	for _, si := range instances {
		got, _ := testutil.EventuallyCondition(t, k8sClient, si, testutil.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionTrue, Reason: oriav1alpha1.ReasonBound})
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			require.NoError(c, k8sClient.Get(context.Background(), client.ObjectKeyFromObject(si), got))
			assert.Equal(c, namespaces, got.Status.BoundNamespaces)
		}, testutil.Timeout, testutil.Interval)
		rbs := &rbacv1.RoleBindingList{}
		require.NoError(t, k8sClient.List(context.Background(), rbs, client.MatchingLabels{oriav1alpha1.LabelScopeInstance: names.LabelValue(si.Name)}))
		per := map[string]int{}
		for _, rb := range rbs.Items {
			per[rb.Namespace]++
		}
		assert.Len(t, per, len(namespaces), "instance %s: namespaces with a RoleBinding", si.Name)
		for ns, n := range per {
			assert.Equal(t, 1, n, "instance %s: RoleBindings in %s", si.Name, ns)
		}
	}
	assert.Equal(t, len(instances)*len(namespaces), countBindings(t, instances), "exactly the bindings asked for")
}
