package e2e

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/testutil"
)

// gcGateNamespaces is how many namespaces the gated instance of
// TestGateNameHeldWithoutOria selects (the 24).
const gcGateNamespaces = 24

// gateSquatter creates a user who may create ClusterRoles with any rules
// (create and escalate on clusterroles) and may not bind one: without a
// binding that names their role, what they create grants nobody anything.
func gateSquatter(t *testing.T, prefix string) (string, client.Client) {
	t.Helper()
	name := testutil.UniqueName(prefix)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "role-maker-" + name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, Verbs: []string{"create", "escalate", "get"}},
	}}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{testutil.User(name)}}
	for _, o := range []client.Object{role, crb} {
		testutil.Create(t, k8sClient, o)
	}
	return name, impersonate(t, name)
}

// namedBy counts the RoleBindings (as the API server has them, deleting
// or not) whose roleRef is the ClusterRole role.
func namedBy(role string) (int, error) {
	var rbs rbacv1.RoleBindingList
	if err := k8sClient.List(context.Background(), &rbs); err != nil {
		return 0, err
	}
	n := 0
	for _, b := range rbs.Items {
		if b.RoleRef.Kind == "ClusterRole" && b.RoleRef.Name == role {
			n++
		}
	}
	return n, nil
}

// TestGateNameHeldWithoutOria (issue 38, case 5): an admin deletes a gated
// instance while no oria runs, so only the garbage collector removes its
// gate and its 24 RoleBindings. A user who may create ClusterRoles (with
// any rules: escalate) and may not bind tries, from the moment of the
// delete, to create a ClusterRole with secrets read under the gate's name.
// The gate carries the foregroundDeletion finalizer and every binding of it
// blocks its owner's deletion, so the collector deletes the gate in the
// foreground: its name stays held until no binding names it. The squat
// succeeds only then, and no SubjectAccessReview, polled throughout, lets
// the bindings' subject (the squatter) read secrets.
func TestGateNameHeldWithoutOria(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	user, as := gateSquatter(t, "gc-squatter")
	selected := map[string]string{"gc-gate": user}
	nss := make([]string, gcGateNamespaces)
	for i := range nss {
		nss[i] = createNamespace(t, "gc-gate", selected)
	}
	// The admin's time-bound grant of view to the user, open for an hour.
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("gc-view"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User(user))
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("gc-gated")},
		Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: tmpl.Name,
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: selected}, ExpiresAt: wholeSecondsFromNow(time.Hour)}}
	require.NoError(t, k8sClient.Create(ctx, tmpl))
	require.NoError(t, k8sClient.Create(ctx, si))
	cleanup(t, tmpl, si)
	require.True(t, binding.Gated(si.Spec))
	gate := binding.GateName(si.Name, string(si.UID))
	waitReason(t, si, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.ElementsMatch(c, nss, gateBindings(c, si.Name)["ClusterRole/"+gate], "the gate's bindings")
	}, testutil.Timeout, testutil.Interval)
	secrets := make([]testutil.Access, len(nss))
	for i, ns := range nss {
		secrets[i] = testutil.Access{User: user, Verb: "get", Resource: "secrets", Namespace: ns}
		require.False(t, can(t, secrets[i]), "the grant is view: no secrets")
	}

	// No oria runs: only the garbage collector acts on the delete.
	oria.Stop()
	oriaLog += ".gc"
	t.Cleanup(func() {
		if oria.Exited() {
			var err error
			oria, err = startOria(ctx)
			require.NoError(t, err)
		}
	})
	squat := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: gate}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}}}}
	t.Cleanup(func() {
		_ = k8sClient.Delete(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: gate}})
	})
	writes := watchGateWrites(t, gate, si.Name)
	deleted := time.Now()
	require.NoError(t, k8sClient.Delete(ctx, si))
	// The collector's foreground deletion took 2 to 9 s here, on a busy
	// machine: give it time.
	until := deleted.Add(40 * time.Second)

	// The squatter, in a tight loop from the delete on.
	var squatted atomic.Bool
	var squatAt time.Time
	var squatRV uint64
	namedAtSquat := -1
	var wg sync.WaitGroup
	wg.Go(func() {
		for time.Now().Before(until) {
			created := squat.DeepCopy()
			err := as.Create(ctx, created)
			if err == nil {
				var lerr error
				squatAt = time.Now()
				squatRV, _ = strconv.ParseUint(created.ResourceVersion, 10, 64)
				if namedAtSquat, lerr = namedBy(gate); lerr != nil {
					t.Errorf("listing the RoleBindings: %v", lerr)
				}
				squatted.Store(true)
				return
			}
			if !apierrors.IsAlreadyExists(err) {
				t.Errorf("creating the squat: %v", err)
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	})

	// SubjectAccessReviews for the subject, in every namespace, until two
	// seconds after the squat (or the deadline).
	var reviews, allowed atomic.Int64
	var firstAllowed string
	var bindingsGone time.Time
	var mu sync.Mutex
	for time.Now().Before(until) && !(squatted.Load() && time.Since(squatAt) > 2*time.Second) {
		var round sync.WaitGroup
		for _, a := range secrets {
			round.Go(func() {
				ok, err := testutil.Allowed(ctx, k8sClient, a)
				if err != nil {
					return
				}
				reviews.Add(1)
				if ok {
					allowed.Add(1)
					mu.Lock()
					if firstAllowed == "" {
						firstAllowed = a.Namespace
					}
					mu.Unlock()
				}
			})
		}
		round.Wait()
		if bindingsGone.IsZero() {
			if n, err := namedBy(gate); err == nil && n == 0 {
				bindingsGone = time.Now()
			}
		}
	}
	wg.Wait()

	require.True(t, squatted.Load(), "the gate's name was never freed within %s of the delete", until.Sub(deleted))
	// The order of the writes, by the one etcd's revisions (see
	// gateWrites): every binding was gone before the squat was made.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		writes.mu.Lock()
		defer writes.mu.Unlock()
		assert.Len(c, writes.bindingsGone, gcGateNamespaces, "binding deletions seen")
		assert.NotZero(c, writes.gateGone, "gate deletion seen")
	}, testutil.Timeout, testutil.Interval)
	writes.mu.Lock()
	after := 0
	for _, rv := range writes.bindingsGone {
		if rv > squatRV {
			after++
		}
	}
	writes.mu.Unlock()
	assert.Zero(t, after, "%d of the gate's %d RoleBindings were deleted after the squat was created", after, gcGateNamespaces)
	assert.Zero(t, namedAtSquat, "the squat was created while %d RoleBindings still named the gate", namedAtSquat)
	assert.Zero(t, allowed.Load(), "%d of %d SubjectAccessReviews let the bindings' subject read secrets (first in %s)",
		allowed.Load(), reviews.Load(), firstAllowed)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Empty(c, gateBindings(c, si.Name), "the instance's bindings")
	}, testutil.Timeout, testutil.Interval)
	got := &rbacv1.ClusterRole{}
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKey{Name: gate}, got))
	assert.Equal(t, squat.Rules, got.Rules, "the squat holds the name now, and grants nobody anything")
	assert.Empty(t, got.OwnerReferences)
	assert.Nil(t, got.DeletionTimestamp)
	t.Logf("gated instance over %d namespaces deleted with no oria running: the squat succeeded %s after the delete, "+
		"%d bindings deleted after it, %d named the gate just after it (no binding left %s after the delete); %d SubjectAccessReviews, %d allowed",
		gcGateNamespaces, squatAt.Sub(deleted).Round(time.Millisecond), after, namedAtSquat, bindingsGone.Sub(deleted).Round(time.Millisecond),
		reviews.Load(), allowed.Load())
}
