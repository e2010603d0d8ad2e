package rbacpolicy_test

import (
	"context"
	"testing"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller"
	"github.com/operator-framework/oria/internal/controller/extension"
	"github.com/operator-framework/oria/internal/controller/rbacpolicy"
	"github.com/operator-framework/oria/internal/controller/scopeinstance"
	"github.com/operator-framework/oria/internal/controller/scopetemplate"
	"github.com/operator-framework/oria/internal/engine"
	policymodel "github.com/operator-framework/oria/internal/policy"
	"github.com/operator-framework/oria/internal/testutil"
)

var (
	k8sClient client.Client
	// mgr runs only the RBACPolicy controller, as oria's own RBAC.
	mgr ctrl.Manager
	// deps are the RBACPolicy controller's, as controller.SetupAll makes
	// them: a Reconciler a test builds shares them.
	deps rbacpolicy.Deps
)

// TestMain starts the API server and one manager running the RBACPolicy
// controller and the ClusterExtension controller (which generates the roles
// a policy binds: a policy binds only roles oria made or validated). No
// ScopeInstance controller runs here: tests play its part by writing
// ScopeInstance status, which isolates the policy's own logic (the whole
// chain runs in test/e2e).
func TestMain(m *testing.M) {
	testutil.RunWithManager(m, &k8sClient, &mgr, func(mg ctrl.Manager) error {
		s, err := controller.NewShared(mg, engine.Unobserved)
		if err != nil {
			return err
		}
		if err := extension.SetupWithManager(mg, s.ExtensionDeps(mg), extension.Options{
			DefaultMode: oriav1alpha1.RBACModeUnmanaged, ConflictRecheckInterval: time.Second}); err != nil {
			return err
		}
		deps = s.RBACPolicyDeps(mg)
		return rbacpolicy.SetupWithManager(mg, deps, rbacpolicy.Options{
			DefaultMode: oriav1alpha1.RBACModeUnmanaged, MaxConcurrentReconciles: 2, ConflictRecheckInterval: time.Second})
	})
}

// bindingLayer registers the ScopeTemplate and ScopeInstance controllers
// with m, as controller.SetupAll does.
func bindingLayer(m ctrl.Manager) error {
	s, err := controller.NewShared(m, engine.Unobserved)
	if err != nil {
		return err
	}
	if err := scopetemplate.SetupWithManager(m, s.ScopeTemplateDeps(m), scopetemplate.Options{}); err != nil {
		return err
	}
	return scopeinstance.SetupWithManager(m, s.ScopeInstanceDeps(m), scopeinstance.Options{})
}

// installed creates a ClusterExtension in mode with CRDs for the given
// plurals in a group of its own (prefix plus a random part, so that tests and
// repeated runs never share a CRD), as operator-controller leaves them.
func installed(t *testing.T, mode oriav1alpha1.RBACMode, prefix string, plurals ...string) (*ocv1.ClusterExtension, string) {
	t.Helper()
	group := testutil.UniqueName(prefix) + ".example.com"
	ext := testutil.ClusterExtension(testutil.UniqueName("ext"), mode)
	testutil.Create(t, k8sClient, ext)
	for _, p := range plurals {
		addCRD(t, ext.Name, group, p)
	}
	return ext, group
}

func addCRD(t *testing.T, ext, group, plural string) {
	t.Helper()
	testutil.Create(t, k8sClient, testutil.CRD(group, plural, "Kind"+plural, ext))
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
	testutil.Create(t, k8sClient, p)
	return p
}

// waitReady waits until the policy's Ready condition has the reason (for
// the current generation) and returns the policy.
func waitReady(t *testing.T, name, reason string) *oriav1alpha1.RBACPolicy {
	t.Helper()
	p, _ := testutil.EventuallyCondition(t, k8sClient, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}},
		testutil.Condition{Type: oriav1alpha1.TypeReady, Reason: reason})
	return p
}

// waitMessage waits until the policy's Ready condition has the reason and
// a message containing part.
func waitMessage(t *testing.T, name, reason, part string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		p := &oriav1alpha1.RBACPolicy{}
		require.NoError(c, k8sClient.Get(context.Background(), client.ObjectKey{Name: name}, p))
		cond := meta.FindStatusCondition(p.Status.Conditions, oriav1alpha1.TypeReady)
		require.NotNil(c, cond)
		assert.Equal(c, reason, cond.Reason)
		assert.Contains(c, cond.Message, part)
	}, testutil.Timeout, testutil.Interval)
}

func readyMessage(p *oriav1alpha1.RBACPolicy) string {
	return meta.FindStatusCondition(p.Status.Conditions, oriav1alpha1.TypeReady).Message
}

// compiled returns the compiled ScopeTemplate and ScopeInstance of a policy,
// by name only.
func compiled(policy string) (*oriav1alpha1.ScopeTemplate, *oriav1alpha1.ScopeInstance) {
	om := metav1.ObjectMeta{Name: policymodel.ObjectName(policy)}
	return &oriav1alpha1.ScopeTemplate{ObjectMeta: om}, &oriav1alpha1.ScopeInstance{ObjectMeta: om}
}

// getTemplate waits until the policy's compiled template exists and
// returns it.
func getTemplate(t *testing.T, policy string) *oriav1alpha1.ScopeTemplate {
	t.Helper()
	st, _ := compiled(policy)
	return testutil.EventuallyGet(t, k8sClient, st)
}

// eventuallyTemplateRoles waits until the policy's compiled template lists
// exactly the roles want.
func eventuallyTemplateRoles(t *testing.T, policy string, want ...string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st, _ := compiled(policy)
		require.NoError(c, k8sClient.Get(context.Background(), client.ObjectKeyFromObject(st), st))
		assert.Equal(c, want, templateRoles(st))
	}, testutil.Timeout, testutil.Interval)
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
	st, si := compiled(policy)
	testutil.EventuallyGone(t, k8sClient, st, si)
}

// markInstance plays the ScopeInstance controller: once the compiled
// instance exists, it sets its Ready condition and bound namespaces.
func markInstance(t *testing.T, policy string, status metav1.ConditionStatus, reason, msg string, bound ...string) {
	t.Helper()
	_, si := compiled(policy)
	si = testutil.EventuallyGet(t, k8sClient, si)
	testutil.UpdateStatus(t, k8sClient, si, func() {
		meta.SetStatusCondition(&si.Status.Conditions, metav1.Condition{
			Type: oriav1alpha1.TypeReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: si.Generation,
		})
		si.Status.Scope = oriav1alpha1.ScopeNamespaces
		si.Status.BoundNamespaces = bound
		si.Status.BoundNamespaceCount = int32(len(bound))
	})
}
