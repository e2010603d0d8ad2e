package rbacpolicy_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller/rbacpolicy"
	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/localcluster"
)

var (
	cluster   *localcluster.Cluster
	k8sClient client.Client
	// mgr runs only the RBACPolicy controller, as oria's own RBAC.
	mgr ctrl.Manager
)

const (
	timeout  = 30 * time.Second
	interval = 50 * time.Millisecond
)

// TestMain starts the API server and one manager running only the RBACPolicy
// controller. No ScopeInstance controller runs here: tests play its part by
// writing ScopeInstance status, which isolates the policy's own logic (the
// whole chain runs in test/e2e).
func TestMain(m *testing.M) {
	testutil.RunWithManager(m, &cluster, &k8sClient, &mgr, func(mg ctrl.Manager) error {
		return rbacpolicy.SetupWithManager(mg, rbacpolicy.Options{
			DefaultMode: oriav1alpha1.RBACModeUnmanaged, MaxConcurrentReconciles: 2, ConflictRecheckInterval: time.Second})
	})
}

// installed creates a ClusterExtension in mode with CRDs for the given
// plurals in a group of its own (prefix plus a random part, so that tests and
// repeated runs never share a CRD), as operator-controller leaves them.
func installed(t *testing.T, mode oriav1alpha1.RBACMode, prefix string, plurals ...string) (*ocv1.ClusterExtension, string) {
	t.Helper()
	group := testutil.UniqueName(prefix) + ".example.com"
	ctx := context.Background()
	ext := testutil.ClusterExtension(testutil.UniqueName("ext"), mode)
	require.NoError(t, k8sClient.Create(ctx, ext))
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, ext) })
	for _, p := range plurals {
		addCRD(t, ext.Name, group, p)
	}
	return ext, group
}

func addCRD(t *testing.T, ext, group, plural string) {
	t.Helper()
	ctx := context.Background()
	crd := testutil.CRD(group, plural, "Kind"+plural, ext)
	require.NoError(t, k8sClient.Create(ctx, crd))
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, crd) })
}

func newPolicy(t *testing.T, ext string, access oriav1alpha1.Access, mutate ...func(*oriav1alpha1.RBACPolicySpec)) *oriav1alpha1.RBACPolicy {
	t.Helper()
	p := &oriav1alpha1.RBACPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("policy")},
		Spec: oriav1alpha1.RBACPolicySpec{
			ExtensionName: ext,
			Access:        access,
			Subjects:      []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "developers"}},
			Namespaces:    []string{"team-a"},
		},
	}
	for _, m := range mutate {
		m(&p.Spec)
	}
	require.NoError(t, k8sClient.Create(context.Background(), p))
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), p) })
	return p
}

// waitReady waits until the policy's Ready condition has the reason (for
// the current generation) and returns the policy.
func waitReady(t *testing.T, name, reason string) *oriav1alpha1.RBACPolicy {
	t.Helper()
	p := &oriav1alpha1.RBACPolicy{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, k8sClient.Get(context.Background(), client.ObjectKey{Name: name}, p))
		cond := meta.FindStatusCondition(p.Status.Conditions, oriav1alpha1.TypeReady)
		require.NotNil(c, cond)
		assert.Equal(c, reason, cond.Reason, cond.Message)
		assert.Equal(c, p.Generation, cond.ObservedGeneration)
	}, timeout, interval)
	return p
}

func readyMessage(p *oriav1alpha1.RBACPolicy) string {
	return meta.FindStatusCondition(p.Status.Conditions, oriav1alpha1.TypeReady).Message
}

func getTemplate(t *testing.T, name string) *oriav1alpha1.ScopeTemplate {
	t.Helper()
	st := &oriav1alpha1.ScopeTemplate{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, k8sClient.Get(context.Background(), client.ObjectKey{Name: rbacpolicy.ObjectName(name)}, st))
	}, timeout, interval)
	return st
}

func templateRoles(st *oriav1alpha1.ScopeTemplate) []string {
	var out []string
	for _, r := range st.Spec.ClusterRoles {
		out = append(out, r.Name)
	}
	return out
}

// compiledGone waits until neither compiled object exists.
func compiledGone(t *testing.T, policy string) {
	t.Helper()
	require.Eventually(t, func() bool {
		key := client.ObjectKey{Name: rbacpolicy.ObjectName(policy)}
		return apierrors.IsNotFound(k8sClient.Get(context.Background(), key, &oriav1alpha1.ScopeTemplate{})) &&
			apierrors.IsNotFound(k8sClient.Get(context.Background(), key, &oriav1alpha1.ScopeInstance{}))
	}, timeout, interval)
}

// markInstance plays the ScopeInstance controller: it sets the instance's
// Ready condition and bound namespaces.
func markInstance(t *testing.T, policy string, status metav1.ConditionStatus, reason, msg string, bound ...string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		si := &oriav1alpha1.ScopeInstance{}
		require.NoError(c, k8sClient.Get(context.Background(), client.ObjectKey{Name: rbacpolicy.ObjectName(policy)}, si))
		meta.SetStatusCondition(&si.Status.Conditions, metav1.Condition{
			Type: oriav1alpha1.TypeReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: si.Generation,
		})
		si.Status.Scope = oriav1alpha1.ScopeNamespaces
		si.Status.BoundNamespaces = bound
		si.Status.BoundNamespaceCount = int32(len(bound))
		require.NoError(c, k8sClient.Status().Update(context.Background(), si))
	}, timeout, interval)
}

func TestCompilesAndMirrorsInstance(t *testing.T) {
	ext, group := installed(t, oriav1alpha1.RBACModeFineGrained, "mirror", "widgets")
	p := newPolicy(t, ext.Name, oriav1alpha1.AccessEdit)

	waitReady(t, p.Name, oriav1alpha1.ReasonProgressing)
	st := getTemplate(t, p.Name)
	assert.Equal(t, []string{"widgets." + group + "-edit", "widgets." + group + "-view", "widgets." + group + "-view-crdview"}, templateRoles(st))
	assert.Equal(t, []rbacv1.Subject{{Kind: "Group", APIGroup: rbacv1.GroupName, Name: "developers"}}, st.Spec.BindingTemplate.Subjects)
	si := &oriav1alpha1.ScopeInstance{}
	require.NoError(t, k8sClient.Get(context.Background(), client.ObjectKey{Name: rbacpolicy.ObjectName(p.Name)}, si))
	assert.Equal(t, []string{"team-a"}, si.Spec.Namespaces)
	assert.Equal(t, st.Name, si.Spec.ScopeTemplateName)
	require.True(t, metav1.IsControlledBy(si, p) && metav1.IsControlledBy(st, p), "compiled objects are controlled by the policy")

	markInstance(t, p.Name, metav1.ConditionFalse, oriav1alpha1.ReasonNamespaceNotFound, `namespace "team-a" does not exist`)
	got := waitReady(t, p.Name, oriav1alpha1.ReasonNamespaceNotFound)
	assert.Contains(t, readyMessage(got), `namespace "team-a" does not exist`)

	markInstance(t, p.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound, "bound", "team-a")
	got = waitReady(t, p.Name, oriav1alpha1.ReasonBound)
	assert.Equal(t, []string{"team-a"}, got.Status.BoundNamespaces)
	assert.Equal(t, int32(1), got.Status.BoundNamespaceCount)
	assert.Equal(t, []string{"widgets." + group}, got.Status.APIs)
	assert.Equal(t, oriav1alpha1.ScopeNamespaces, got.Status.Scope)
	assert.Equal(t, st.Name, got.Status.ScopeTemplateName)

	// Quiet: with nothing changed, a reconcile writes nothing.
	counting, writes := testutil.CountingClient(mgr.GetClient())
	r := &rbacpolicy.Reconciler{Client: counting, Recorder: events.NewFakeRecorder(10), DefaultMode: oriav1alpha1.RBACModeUnmanaged}
	for range 3 {
		_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: p.Name}})
		require.NoError(t, err)
	}
	assert.Zero(t, writes.Total(), "writes on an unchanged world: %s", writes)

	// Changing the access level recompiles the template.
	require.NoError(t, k8sClient.Get(context.Background(), client.ObjectKeyFromObject(p), p))
	p.Spec.Access = oriav1alpha1.AccessView
	require.NoError(t, k8sClient.Update(context.Background(), p))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st := &oriav1alpha1.ScopeTemplate{}
		require.NoError(c, k8sClient.Get(context.Background(), client.ObjectKey{Name: rbacpolicy.ObjectName(p.Name)}, st))
		assert.Equal(c, []string{"widgets." + group + "-view", "widgets." + group + "-view-crdview"}, templateRoles(st))
	}, timeout, interval)

	// Deleting the policy revokes at once: the compiled objects are
	// deleted by the controller (no garbage collector runs here).
	require.NoError(t, k8sClient.Delete(context.Background(), p))
	compiledGone(t, p.Name)
}

func TestExtensionNotFoundThenInstalled(t *testing.T) {
	name := testutil.UniqueName("later")
	p := newPolicy(t, name, oriav1alpha1.AccessView)
	got := waitReady(t, p.Name, oriav1alpha1.ReasonExtensionNotFound)
	assert.Contains(t, readyMessage(got), name)
	compiledGone(t, p.Name)

	ext := testutil.ClusterExtension(name, oriav1alpha1.RBACModeFineGrained)
	require.NoError(t, k8sClient.Create(context.Background(), ext))
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), ext) })
	waitReady(t, p.Name, oriav1alpha1.ReasonAPINotFound)
	addCRD(t, name, testutil.UniqueName("later")+".example.com", "gadgets")
	waitReady(t, p.Name, oriav1alpha1.ReasonProgressing)
	getTemplate(t, p.Name)

	// The extension is uninstalled: the grant goes with it.
	require.NoError(t, k8sClient.Delete(context.Background(), ext))
	waitReady(t, p.Name, oriav1alpha1.ReasonExtensionNotFound)
	compiledGone(t, p.Name)
}

func TestUnmanagedExtensionRevokes(t *testing.T) {
	// No annotation: the controller default (Unmanaged) applies.
	ext, _ := installed(t, "", "unmanaged", "things")
	p := newPolicy(t, ext.Name, oriav1alpha1.AccessView)
	got := waitReady(t, p.Name, oriav1alpha1.ReasonExtensionUnmanaged)
	assert.Contains(t, readyMessage(got), "Unmanaged")
	compiledGone(t, p.Name)

	setMode(t, ext.Name, oriav1alpha1.RBACModeFineGrained)
	waitReady(t, p.Name, oriav1alpha1.ReasonProgressing)
	getTemplate(t, p.Name)

	// Legacy also generates the roles, so the policy keeps working.
	setMode(t, ext.Name, oriav1alpha1.RBACModeLegacy)
	waitReady(t, p.Name, oriav1alpha1.ReasonProgressing)

	// An invalid mode changes nothing.
	setMode(t, ext.Name, "Sometimes")
	got = waitReady(t, p.Name, oriav1alpha1.ReasonExtensionUnmanaged)
	assert.Contains(t, readyMessage(got), "invalid")
	getTemplate(t, p.Name)

	setMode(t, ext.Name, oriav1alpha1.RBACModeUnmanaged)
	waitReady(t, p.Name, oriav1alpha1.ReasonExtensionUnmanaged)
	compiledGone(t, p.Name)
}

func setMode(t *testing.T, ext string, mode oriav1alpha1.RBACMode) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ce := &ocv1.ClusterExtension{}
		require.NoError(c, k8sClient.Get(context.Background(), client.ObjectKey{Name: ext}, ce))
		if ce.Annotations == nil {
			ce.Annotations = map[string]string{}
		}
		ce.Annotations[oriav1alpha1.AnnotationRBACMode] = string(mode)
		require.NoError(c, k8sClient.Update(context.Background(), ce))
	}, timeout, interval)
}

func TestInvalidSubjectAndSelectorKeepGrants(t *testing.T) {
	ext, _ := installed(t, oriav1alpha1.RBACModeFineGrained, "invalid", "boxes")
	p := newPolicy(t, ext.Name, oriav1alpha1.AccessView)
	waitReady(t, p.Name, oriav1alpha1.ReasonProgressing)
	before := getTemplate(t, p.Name)

	update := func(mutate func(*oriav1alpha1.RBACPolicySpec)) {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			require.NoError(c, k8sClient.Get(context.Background(), client.ObjectKeyFromObject(p), p))
			mutate(&p.Spec)
			require.NoError(c, k8sClient.Update(context.Background(), p))
		}, timeout, interval)
	}
	update(func(s *oriav1alpha1.RBACPolicySpec) {
		s.Subjects = append(s.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "bot"})
	})
	got := waitReady(t, p.Name, oriav1alpha1.ReasonInvalidSubject)
	assert.Contains(t, readyMessage(got), `ServiceAccount "bot" needs a namespace`)
	after := getTemplate(t, p.Name)
	assert.Equal(t, before.Spec, after.Spec, "an invalid edit leaves the existing grant alone")

	update(func(s *oriav1alpha1.RBACPolicySpec) {
		s.Subjects = s.Subjects[:1]
		s.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Bogus"}}}
	})
	got = waitReady(t, p.Name, oriav1alpha1.ReasonInvalidSelector)
	assert.Contains(t, readyMessage(got), "Bogus")

	update(func(s *oriav1alpha1.RBACPolicySpec) { s.NamespaceSelector = nil })
	waitReady(t, p.Name, oriav1alpha1.ReasonProgressing)
}

func TestUpgradeAddsAndRemovesAPIs(t *testing.T) {
	ext, group := installed(t, oriav1alpha1.RBACModeFineGrained, "upgrade", "alphas")
	p := newPolicy(t, ext.Name, oriav1alpha1.AccessAdmin)
	waitReady(t, p.Name, oriav1alpha1.ReasonProgressing)
	assert.Equal(t, []string{"alphas." + group + "-admin", "alphas." + group + "-view-crdview"}, templateRoles(getTemplate(t, p.Name)))

	// An upgrade adds an API: the policy covers it without being edited.
	crd := testutil.CRD(group, "betas", "Beta", ext.Name)
	require.NoError(t, k8sClient.Create(context.Background(), crd))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st := &oriav1alpha1.ScopeTemplate{}
		require.NoError(c, k8sClient.Get(context.Background(), client.ObjectKey{Name: rbacpolicy.ObjectName(p.Name)}, st))
		assert.Equal(c, []string{
			"alphas." + group + "-admin", "alphas." + group + "-view-crdview",
			"betas." + group + "-admin", "betas." + group + "-view-crdview",
		}, templateRoles(st))
	}, timeout, interval)

	// The next upgrade drops it again.
	require.NoError(t, k8sClient.Delete(context.Background(), crd))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st := &oriav1alpha1.ScopeTemplate{}
		require.NoError(c, k8sClient.Get(context.Background(), client.ObjectKey{Name: rbacpolicy.ObjectName(p.Name)}, st))
		assert.Equal(c, []string{"alphas." + group + "-admin", "alphas." + group + "-view-crdview"}, templateRoles(st))
	}, timeout, interval)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &oriav1alpha1.RBACPolicy{}
		require.NoError(c, k8sClient.Get(context.Background(), client.ObjectKeyFromObject(p), got))
		assert.Equal(c, []string{"alphas." + group}, got.Status.APIs)
	}, timeout, interval)
}

func TestNarrowedToMissingAPI(t *testing.T) {
	ext, group := installed(t, oriav1alpha1.RBACModeFineGrained, "narrow", "ones")
	p := newPolicy(t, ext.Name, oriav1alpha1.AccessView, func(s *oriav1alpha1.RBACPolicySpec) {
		s.APIs = []oriav1alpha1.APIRef{{Group: group, Resource: "twos"}}
	})
	got := waitReady(t, p.Name, oriav1alpha1.ReasonAPINotFound)
	assert.Contains(t, readyMessage(got), "twos."+group)
	compiledGone(t, p.Name)

	// Partly available: granted for what exists, still reported.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, k8sClient.Get(context.Background(), client.ObjectKeyFromObject(p), p))
		p.Spec.APIs = append(p.Spec.APIs, oriav1alpha1.APIRef{Group: group, Resource: "ones"})
		require.NoError(c, k8sClient.Update(context.Background(), p))
	}, timeout, interval)
	getTemplate(t, p.Name)
	markInstance(t, p.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound, "bound", "team-a")
	got = waitReady(t, p.Name, oriav1alpha1.ReasonAPINotFound)
	assert.Contains(t, readyMessage(got), "granted for ones."+group)
	assert.Contains(t, readyMessage(got), "twos."+group)
}

func TestConflictWithForeignTemplate(t *testing.T) {
	ext, _ := installed(t, oriav1alpha1.RBACModeFineGrained, "conflict", "crates")
	name := testutil.UniqueName("policy")
	foreign := &oriav1alpha1.ScopeTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: rbacpolicy.ObjectName(name)},
		Spec: oriav1alpha1.ScopeTemplateSpec{
			ClusterRoles:    []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}},
			BindingTemplate: oriav1alpha1.BindingTemplate{Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "someone"}}},
		},
	}
	require.NoError(t, k8sClient.Create(context.Background(), foreign))
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), foreign) })

	p := &oriav1alpha1.RBACPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: ext.Name, Access: oriav1alpha1.AccessView,
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "alice"}}},
	}
	require.NoError(t, k8sClient.Create(context.Background(), p))
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), p) })
	got := waitReady(t, name, oriav1alpha1.ReasonConflict)
	assert.Contains(t, readyMessage(got), fmt.Sprintf("ScopeTemplate %q exists and was not created by this RBACPolicy", foreign.Name))

	after := &oriav1alpha1.ScopeTemplate{}
	require.NoError(t, k8sClient.Get(context.Background(), client.ObjectKeyFromObject(foreign), after))
	assert.Equal(t, foreign.Spec, after.Spec, "a foreign template is never modified")
	assert.Empty(t, after.OwnerReferences)

	// Deleting the policy leaves the foreign template alone.
	require.NoError(t, k8sClient.Delete(context.Background(), p))
	require.Never(t, func() bool {
		return apierrors.IsNotFound(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(foreign), after))
	}, 2*time.Second, 100*time.Millisecond)
}

func TestConflictResolvesWhenForeignObjectGoes(t *testing.T) {
	ext, _ := installed(t, oriav1alpha1.RBACModeFineGrained, "resolve", "crates")
	name := testutil.UniqueName("policy")
	foreign := &oriav1alpha1.ScopeInstance{
		ObjectMeta: metav1.ObjectMeta{Name: rbacpolicy.ObjectName(name)},
		Spec:       oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: "someone-elses"},
	}
	require.NoError(t, k8sClient.Create(context.Background(), foreign))
	p := &oriav1alpha1.RBACPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: ext.Name, Access: oriav1alpha1.AccessView,
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "alice"}}},
	}
	require.NoError(t, k8sClient.Create(context.Background(), p))
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), p) })
	got := waitReady(t, name, oriav1alpha1.ReasonConflict)
	assert.Contains(t, readyMessage(got), fmt.Sprintf("ScopeInstance %q exists", foreign.Name))

	// Nothing about the policy changes, yet it recovers once the foreign
	// object is gone.
	require.NoError(t, k8sClient.Delete(context.Background(), foreign))
	waitReady(t, name, oriav1alpha1.ReasonProgressing)
	getTemplate(t, name)
}

// TestSchemaRejectsBadInput: what the CRD schema can check is refused at
// once by the API server, with a message naming the field.
func TestSchemaRejectsBadInput(t *testing.T) {
	valid := func() *oriav1alpha1.RBACPolicy {
		return &oriav1alpha1.RBACPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("bad")},
			Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: "x", Access: oriav1alpha1.AccessView,
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "alice"}}},
		}
	}
	for _, tc := range []struct {
		name   string
		mutate func(*oriav1alpha1.RBACPolicySpec)
		want   string
	}{
		{"unknown access", func(s *oriav1alpha1.RBACPolicySpec) { s.Access = "owner" }, "spec.access"},
		{"no subjects", func(s *oriav1alpha1.RBACPolicySpec) { s.Subjects = nil }, "spec.subjects"},
		{"empty extension", func(s *oriav1alpha1.RBACPolicySpec) { s.ExtensionName = "" }, "spec.extensionName"},
		{"invalid namespace name", func(s *oriav1alpha1.RBACPolicySpec) { s.Namespaces = []string{"Team_A"} }, "spec.namespaces[0]"},
		{"api without resource", func(s *oriav1alpha1.RBACPolicySpec) { s.APIs = []oriav1alpha1.APIRef{{Group: "argoproj.io"}} }, "spec.apis[0].resource"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := valid()
			tc.mutate(&p.Spec)
			err := k8sClient.Create(context.Background(), p)
			require.Error(t, err)
			assert.True(t, apierrors.IsInvalid(err), "want Invalid, got %v", err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// And the valid base is accepted, so the cases above fail for their
	// own reason.
	p := valid()
	require.NoError(t, k8sClient.Create(context.Background(), p))
	require.NoError(t, k8sClient.Delete(context.Background(), p))
}

// TestCompiledObjectsAreRestored: an edit of the compiled objects (spec or
// oria's labels) is undone, and a deleted one comes back.
func TestCompiledObjectsAreRestored(t *testing.T) {
	ctx := context.Background()
	ext, group := installed(t, oriav1alpha1.RBACModeFineGrained, "drift", "gears")
	p := newPolicy(t, ext.Name, oriav1alpha1.AccessView)
	want := getTemplate(t, p.Name)

	for _, edit := range []func(*oriav1alpha1.ScopeTemplate){
		func(st *oriav1alpha1.ScopeTemplate) { st.Labels[oriav1alpha1.LabelRBACPolicy] = "someone-else" },
		func(st *oriav1alpha1.ScopeTemplate) {
			st.Spec.BindingTemplate.Subjects = []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "mallory"}}
		},
	} {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			st := &oriav1alpha1.ScopeTemplate{}
			require.NoError(c, k8sClient.Get(ctx, client.ObjectKeyFromObject(want), st))
			edit(st)
			require.NoError(c, k8sClient.Update(ctx, st))
		}, timeout, interval)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			st := &oriav1alpha1.ScopeTemplate{}
			require.NoError(c, k8sClient.Get(ctx, client.ObjectKeyFromObject(want), st))
			assert.Equal(c, want.Spec, st.Spec)
			assert.Equal(c, p.Name, st.Labels[oriav1alpha1.LabelRBACPolicy])
		}, timeout, interval)
	}

	si := &oriav1alpha1.ScopeInstance{}
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKey{Name: rbacpolicy.ObjectName(p.Name)}, si))
	require.NoError(t, k8sClient.Delete(ctx, si))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &oriav1alpha1.ScopeInstance{}
		require.NoError(c, k8sClient.Get(ctx, client.ObjectKeyFromObject(si), got))
		assert.NotEqual(c, si.UID, got.UID, "recreated")
		assert.Equal(c, []string{"team-a"}, got.Spec.Namespaces)
	}, timeout, interval)
	assert.Equal(t, []string{"gears." + group + "-view", "gears." + group + "-view-crdview"}, templateRoles(want))
}
