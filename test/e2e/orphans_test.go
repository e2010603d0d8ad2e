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
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller/orphans"
	"github.com/operator-framework/oria/internal/manager"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/testutil"
)

// Issue 29, case 3: orphaned bindings outlive their instance. D deletes an
// admin's ScopeInstance that grants D view in victim with
// --cascade=orphan during a leader handover, when the other replica serves
// the guard but nobody reconciles; the garbage collector removes the
// RoleBinding's ownerReference. Every binding oria made has a living owner,
// or is swept: at takeover, at start, and when seen.

// orphanLease is the Lease oria's replicas elect a leader with (oriaArgs).
var orphanLease = client.ObjectKey{Namespace: "kube-system", Name: manager.LeaderElectionID}

// orphanHolder is the holder of the Lease while oria stands by: a replica
// that is not oria's.
const orphanHolder = "e2e-other-replica"

// setOrphanLease sets the Lease's holder ("" releases it, as a replica
// that stops does) and its duration.
func setOrphanLease(t *testing.T, holder string, seconds int32) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l := &coordinationv1.Lease{}
		if err := k8sClient.Get(context.Background(), orphanLease, l); err != nil {
			return err
		}
		now := metav1.NowMicro()
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = ptr.To(holder), ptr.To(seconds)
		l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
		return k8sClient.Update(context.Background(), l)
	}), "setting the holder of Lease %s to %q", orphanLease, holder)
}

// orphanStandby makes the running oria a replica that serves the guard but
// does not lead: it stops oria (which releases the Lease), gives the Lease
// to another holder for an hour, and starts oria again. When the test ends
// the Lease is released, if it is still held, and oria runs.
func orphanStandby(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	oria.Stop()
	setOrphanLease(t, orphanHolder, 3600)
	t.Cleanup(func() {
		l := &coordinationv1.Lease{}
		if k8sClient.Get(ctx, orphanLease, l) == nil && ptr.Deref(l.Spec.HolderIdentity, "") == orphanHolder {
			setOrphanLease(t, "", 1)
		}
		if oria.Exited() {
			var err error
			oria, err = startOria(ctx)
			require.NoError(t, err)
		}
	})
	oriaLog += ".standby"
	var err error
	oria, err = startOria(ctx)
	require.NoError(t, err, "starting oria as a standby replica")
}

// oriaLeads reports whether the running oria says it acquired the Lease.
func oriaLeads(t *testing.T) bool {
	b, err := os.ReadFile(oria.LogPath)
	require.NoError(t, err)
	return strings.Contains(strings.ToLower(string(b)), "successfully acquired lease")
}

// orphanedView sets up the scene up to the orphaning: an admin's
// ScopeInstance binds view in victim to D; oria stands by (orphanStandby);
// D deletes the instance with propagationPolicy=Orphan, and the garbage
// collector removes the RoleBinding's ownerReference. It returns the
// RoleBinding, which still grants D view in victim, and that access.
func orphanedView(t *testing.T) (*rbacv1.RoleBinding, testutil.Access) {
	t.Helper()
	ctx := context.Background()
	d, _, asD := sequenceUser(t, "orphaner")
	orphanGrantDelete(t, d)
	victim := createNamespace(t, "victim", nil)
	name := testutil.UniqueName("admin-view")
	tmpl := testutil.ScopeTemplate(name, []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User(d))
	si := scopeInstance(name, name, victim)
	require.NoError(t, k8sClient.Create(ctx, tmpl))
	require.NoError(t, k8sClient.Create(ctx, si))
	cleanup(t, tmpl, si)
	waitScopeInstanceReady(t, si.Name)
	view := testutil.Access{User: d, Verb: "list", Resource: "pods", Namespace: victim}
	eventuallyAccess(t, true, view)
	var rbs rbacv1.RoleBindingList
	require.NoError(t, k8sClient.List(ctx, &rbs, client.InNamespace(victim),
		client.MatchingLabels{oriav1alpha1.LabelScopeInstance: names.LabelValue(si.Name)}))
	require.Len(t, rbs.Items, 1, "the instance's RoleBinding in %s", victim)
	rb := &rbs.Items[0]
	cleanup(t, rb)

	orphanStandby(t)
	require.NoError(t, asD.Delete(ctx, si, client.PropagationPolicy(metav1.DeletePropagationOrphan)),
		"D deletes the admin's instance, orphaning its dependents")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := k8sClient.Get(ctx, client.ObjectKeyFromObject(si), &oriav1alpha1.ScopeInstance{})
		assert.True(c, apierrors.IsNotFound(err), "the instance is gone (%v)", err)
		got := &rbacv1.RoleBinding{}
		require.NoError(c, k8sClient.Get(ctx, client.ObjectKeyFromObject(rb), got))
		assert.Empty(c, got.OwnerReferences, "the garbage collector orphaned the RoleBinding")
		assert.Equal(c, names.LabelValue(si.Name), got.Labels[oriav1alpha1.LabelScopeInstance], "it keeps oria's labels")
	}, gcTimeout, testutil.Interval)
	require.False(t, oriaLeads(t), "oria stood by during the orphaning")
	require.True(t, can(t, view), "the orphaned RoleBinding still grants D view in %s", victim)
	return rb, view
}

// orphanGrantDelete lets user delete oria's kinds (a delegated user holds
// create, update, patch and delete on them).
func orphanGrantDelete(t *testing.T, user string) {
	t.Helper()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "oria-delegate-delete-" + user},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{oriav1alpha1.GroupVersion.Group},
			Resources: []string{"scopetemplates", "scopeinstances", "rbacpolicies"},
			Verbs:     []string{"delete"},
		}},
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{testutil.User(user)},
	}
	testutil.Create(t, k8sClient, role)
	testutil.Create(t, k8sClient, crb)
}

// orphanSwept waits until rb is gone and view is denied, and returns how
// long after since each took.
func orphanSwept(t *testing.T, rb *rbacv1.RoleBinding, view testutil.Access, since time.Time) (gone, denied time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool {
		if gone == 0 && apierrors.IsNotFound(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(rb), &rbacv1.RoleBinding{})) {
			gone = time.Since(since)
		}
		if allowed, err := testutil.Allowed(context.Background(), k8sClient, view); err == nil && !allowed && denied == 0 {
			denied = time.Since(since)
		}
		return gone > 0 && denied > 0
	}, testutil.Timeout, 20*time.Millisecond, "the orphaned RoleBinding %s/%s is swept", rb.Namespace, rb.Name)
	return gone, denied
}

// orphanLogged checks that oria logged the deletion of rb, and why.
func orphanLogged(t *testing.T, rb *rbacv1.RoleBinding, reason string) {
	t.Helper()
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(oria.LogPath)
		if err != nil {
			return false
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "deleted an object oria created whose owner is gone") &&
				strings.Contains(line, rb.Name) && strings.Contains(line, rb.Namespace) && strings.Contains(line, reason) {
				return true
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond, "oria logs the deletion of %s/%s (%s)", rb.Namespace, rb.Name, reason)
}

// orphanReport prints a measured figure, in the test log and on stderr.
func orphanReport(t *testing.T, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	t.Log(msg)
	fmt.Fprintln(os.Stderr, msg)
}

// TestOrphanedBindingSweptAtTakeover: the sequence; when oria takes
// the Lease over, the orphaned RoleBinding is deleted and D loses view in
// victim within seconds.
func TestOrphanedBindingSweptAtTakeover(t *testing.T) {
	testutil.NeedCluster(t)
	rb, view := orphanedView(t)

	released := time.Now()
	setOrphanLease(t, "", 1)
	gone, denied := orphanSwept(t, rb, view, released)
	require.True(t, oriaLeads(t), "oria took over")
	orphanLogged(t, rb, orphans.ReasonNoLabelledOwner)
	l := &coordinationv1.Lease{}
	require.NoError(t, k8sClient.Get(context.Background(), orphanLease, l))
	require.NotNil(t, l.Spec.AcquireTime)
	orphanReport(t, "orphans: at takeover, the orphaned RoleBinding was deleted %.2f s and D's view in victim denied %.2f s after the Lease was released; oria acquired it after %.2f s (the standby retries every %v, with jitter)",
		gone.Seconds(), denied.Seconds(), l.Spec.AcquireTime.Sub(released).Seconds(), manager.DefaultRetryPeriod)
	assert.Less(t, denied, 10*time.Second, "revocation within seconds of the takeover")
}

// TestOrphanedBindingSweptAtStart: the same orphan, found by an oria that
// starts (the standby stopped before it led).
func TestOrphanedBindingSweptAtStart(t *testing.T) {
	testutil.NeedCluster(t)
	rb, view := orphanedView(t)

	oria.Stop()
	setOrphanLease(t, "", 1)
	started := time.Now()
	oriaLog += ".started"
	var err error
	oria, err = startOria(context.Background())
	require.NoError(t, err)
	ready := time.Since(started)
	gone, denied := orphanSwept(t, rb, view, started)
	orphanLogged(t, rb, orphans.ReasonNoLabelledOwner)
	orphanReport(t, "orphans: at start, the orphaned RoleBinding was deleted %.2f s and D's view in victim denied %.2f s after oria was started (ready after %.2f s)",
		gone.Seconds(), denied.Seconds(), ready.Seconds())
	assert.Less(t, denied, 15*time.Second, "revocation within seconds of the start")
}

// TestOrphanedBindingSweptWhenSeen: with oria leading, a RoleBinding with
// oria's labels for an instance that does not exist (as the garbage
// collector leaves one) is deleted as soon as it appears; one labelled for
// a living instance stays.
func TestOrphanedBindingSweptWhenSeen(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	victim := createNamespace(t, "victim", nil)
	living := testutil.UniqueName("living")
	tmpl := testutil.ScopeTemplate(living, []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User("nobody-"+living))
	si := scopeInstance(living, living, victim)
	require.NoError(t, k8sClient.Create(ctx, tmpl))
	require.NoError(t, k8sClient.Create(ctx, si))
	cleanup(t, tmpl, si)
	waitScopeInstanceReady(t, si.Name)

	binding := func(name, instance, user string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: victim, Name: name, Labels: ownership.InstanceLabels(instance, instance)},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
			Subjects:   []rbacv1.Subject{testutil.User(user)},
		}
	}
	keptUser, orphanUser := testutil.UniqueName("kept-user"), testutil.UniqueName("orphan-user")
	kept := binding("labelled-for-living", living, keptUser)
	testutil.Create(t, k8sClient, kept)
	orphan := binding("labelled-for-missing", testutil.UniqueName("missing"), orphanUser)
	created := time.Now()
	testutil.Create(t, k8sClient, orphan)
	gone, denied := orphanSwept(t, orphan, testutil.Access{User: orphanUser, Verb: "list", Resource: "pods", Namespace: victim}, created)
	orphanReport(t, "orphans: when seen, a RoleBinding labelled for a missing instance was deleted %.2f s after it was created (its grant gone after %.2f s)",
		gone.Seconds(), denied.Seconds())

	// The one for the living instance is judged by the same watch, at
	// the same time: it is still there, and still grants.
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKeyFromObject(kept), kept), "the binding of a living instance was deleted")
	assert.True(t, can(t, testutil.Access{User: keptUser, Verb: "list", Resource: "pods", Namespace: victim}))
}
