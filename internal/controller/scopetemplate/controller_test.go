package scopetemplate_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller/scopetemplate"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/localcluster"
)

// TestInlineRolesExistOnlyWhileUsed: the template's inline ClusterRoles are
// created when an instance uses the template and deleted when none does;
// referenced roles are never touched.
func TestInlineRolesExistOnlyWhileUsed(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{
		{GenerateName: "gen-", Rules: podRules},
		{Name: "view"},
		{Name: testutil.UniqueName("named"), Rules: podRules},
	}, testutil.User("alice"))
	create(t, tmpl)
	generated := "gen-" + names.Hash(tmpl.Name, "gen-")
	named := tmpl.Spec.ClusterRoles[2].Name
	viewBefore := get(t, "view", &rbacv1.ClusterRole{})

	st := eventuallyReady(t, tmpl.Name, metav1.ConditionTrue, oriav1alpha1.ReasonValid)
	assert.Equal(t, []string{generated, "view", named}, st.Status.ClusterRoles)
	assert.Empty(t, st.Status.Instances)
	assert.Contains(t, readyMessage(t, tmpl.Name), "not used")
	assert.True(t, notFound(generated, &rbacv1.ClusterRole{}))
	assert.True(t, notFound(named, &rbacv1.ClusterRole{}))

	si1 := newInstance(testutil.UniqueName("si"), tmpl.Name)
	si2 := newInstance(testutil.UniqueName("si"), tmpl.Name)
	create(t, si1)
	create(t, si2)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st := get(c, tmpl.Name, &oriav1alpha1.ScopeTemplate{})
		assert.ElementsMatch(c, []string{si1.Name, si2.Name}, st.Status.Instances)
		for _, name := range []string{generated, named} {
			cr := &rbacv1.ClusterRole{}
			if assert.NoError(c, k8sClient.Get(ctx, types.NamespacedName{Name: name}, cr)) {
				assert.Equal(c, podRules, cr.Rules)
				assert.Equal(c, map[string]string{
					oriav1alpha1.LabelManaged: oriav1alpha1.ManagedValue, oriav1alpha1.LabelManagedBy: oriav1alpha1.ManagedByValue,
					oriav1alpha1.LabelScopeTemplate: tmpl.Name,
				}, cr.Labels)
				if assert.Len(c, cr.OwnerReferences, 1) {
					assert.Equal(c, st.UID, cr.OwnerReferences[0].UID)
					assert.True(c, *cr.OwnerReferences[0].Controller)
				}
			}
		}
	}, testutil.Timeout, testutil.Interval)
	eventuallyReady(t, tmpl.Name, metav1.ConditionTrue, oriav1alpha1.ReasonValid)

	// One instance left: the roles stay.
	require.NoError(t, k8sClient.Delete(ctx, si1))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, []string{si2.Name}, get(c, tmpl.Name, &oriav1alpha1.ScopeTemplate{}).Status.Instances)
	}, testutil.Timeout, testutil.Interval)
	get(t, generated, &rbacv1.ClusterRole{})

	// An instance switching to another template no longer uses this one.
	update(t, si2, func() {
		si2.Spec.ScopeTemplateName = testutil.UniqueName("elsewhere")
	})
	testutil.EventuallyGone(t, k8sClient, clusterRole(generated), clusterRole(named))
	eventuallyReady(t, tmpl.Name, metav1.ConditionTrue, oriav1alpha1.ReasonValid)
	// The status is written after the roles are deleted: wait for it.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Empty(c, get(c, tmpl.Name, &oriav1alpha1.ScopeTemplate{}).Status.Instances)
	}, testutil.Timeout, testutil.Interval)

	viewAfter := get(t, "view", &rbacv1.ClusterRole{})
	assert.Equal(t, viewBefore.ResourceVersion, viewAfter.ResourceVersion, "a referenced role is never touched")
}

// TestRoleDriftIsRepaired: a deleted or edited inline role is restored.
func TestRoleDriftIsRepaired(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	role := testutil.UniqueName("role")
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: role, Rules: podRules}}, testutil.User("alice"))
	create(t, tmpl)
	create(t, newInstance(testutil.UniqueName("si"), tmpl.Name))
	testutil.EventuallyGet(t, k8sClient, clusterRole(role))

	orig := get(t, role, &rbacv1.ClusterRole{})
	require.NoError(t, k8sClient.Delete(ctx, orig))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NotEqual(c, orig.UID, get(c, role, &rbacv1.ClusterRole{}).UID)
	}, testutil.Timeout, testutil.Interval)

	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}}
	update(t, cr, func() {
		cr.Rules = append(cr.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, podRules, get(c, role, &rbacv1.ClusterRole{}).Rules)
	}, testutil.Timeout, testutil.Interval)

	// oria's labels removed: the role leaves oria's cache; the
	// ownerReference still says it is oria's, so it is restored.
	update(t, cr, func() {
		cr.Labels = nil
		cr.Rules = []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := get(c, role, &rbacv1.ClusterRole{})
		assert.Equal(c, podRules, got.Rules)
		assert.Equal(c, tmpl.Name, got.Labels[oriav1alpha1.LabelScopeTemplate])
	}, testutil.Timeout, testutil.Interval)
}

// TestConflict: a same-name ClusterRole oria did not create is reported and
// never modified; once it is gone oria creates its own.
func TestConflict(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	role := testutil.UniqueName("taken")
	foreign := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: role, Labels: map[string]string{"owner": "someone"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"*"}}},
	}
	create(t, foreign)
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: role, Rules: podRules}}, testutil.User("alice"))
	create(t, tmpl)
	create(t, newInstance(testutil.UniqueName("si"), tmpl.Name))

	eventuallyReady(t, tmpl.Name, metav1.ConditionFalse, oriav1alpha1.ReasonConflict)
	assert.Contains(t, readyMessage(t, tmpl.Name), role)
	got := get(t, role, &rbacv1.ClusterRole{})
	assert.Equal(t, foreign.Labels, got.Labels)
	assert.Equal(t, foreign.Rules, got.Rules)
	assert.Empty(t, got.OwnerReferences)

	// Another template's role is a conflict too.
	other := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: role, Rules: podRules}}, testutil.User("bob"))
	create(t, other)
	create(t, newInstance(testutil.UniqueName("si"), other.Name))

	require.NoError(t, k8sClient.Delete(ctx, foreign))
	// One of the two templates gets the role; the other reports the
	// conflict with it.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cr := get(c, role, &rbacv1.ClusterRole{})
		owner := ownership.ControllerName(cr.OwnerReferences, ownership.KindScopeTemplate)
		if assert.Contains(c, []string{tmpl.Name, other.Name}, owner) {
			loser := tmpl.Name
			if owner == tmpl.Name {
				loser = other.Name
			}
			assert.Equal(c, podRules, cr.Rules)
			st := get(c, loser, &oriav1alpha1.ScopeTemplate{})
			assert.Equal(c, oriav1alpha1.ReasonConflict, st.Status.Conditions[0].Reason)
			st = get(c, owner, &oriav1alpha1.ScopeTemplate{})
			assert.Equal(c, oriav1alpha1.ReasonValid, st.Status.Conditions[0].Reason)
		}
	}, testutil.Timeout, testutil.Interval)
}

// TestTemplateEditsAndDelete: rule edits reach the role, a renamed role
// replaces the old one, and deleting the template removes its roles.
func TestTemplateEditsAndDelete(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	first, second := testutil.UniqueName("first"), testutil.UniqueName("second")
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: first, Rules: podRules}}, testutil.User("alice"))
	create(t, tmpl)
	create(t, newInstance(testutil.UniqueName("si"), tmpl.Name))
	testutil.EventuallyGet(t, k8sClient, clusterRole(first))

	newRules := []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get"}}}
	update(t, tmpl, func() {
		tmpl.Spec.ClusterRoles[0].Rules = newRules
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, newRules, get(c, first, &rbacv1.ClusterRole{}).Rules)
	}, testutil.Timeout, testutil.Interval)

	update(t, tmpl, func() {
		tmpl.Spec.ClusterRoles[0].Name = second
	})
	testutil.EventuallyGone(t, k8sClient, clusterRole(first))
	testutil.EventuallyGet(t, k8sClient, clusterRole(second))
	st := eventuallyReady(t, tmpl.Name, metav1.ConditionTrue, oriav1alpha1.ReasonValid)
	assert.Equal(t, []string{second}, st.Status.ClusterRoles)

	require.NoError(t, k8sClient.Delete(ctx, tmpl))
	testutil.EventuallyGone(t, k8sClient, clusterRole(second))
}

// TestInvalidTemplate: problems the schema cannot catch are reported, and
// change nothing.
func TestInvalidTemplate(t *testing.T) {
	testutil.NeedCluster(t)
	role := testutil.UniqueName("role")
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: role, Rules: podRules}}, testutil.User("alice"))
	create(t, tmpl)
	create(t, newInstance(testutil.UniqueName("si"), tmpl.Name))
	testutil.EventuallyGet(t, k8sClient, clusterRole(role))

	update(t, tmpl, func() {
		tmpl.Spec.ClusterRoles = append(tmpl.Spec.ClusterRoles, oriav1alpha1.ClusterRoleTemplate{Name: role})
		tmpl.Spec.ClusterRoles[0].Rules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"delete"}}}
	})
	eventuallyReady(t, tmpl.Name, metav1.ConditionFalse, oriav1alpha1.ReasonInvalidSpec)
	assert.Contains(t, readyMessage(t, tmpl.Name), "is also spec.clusterRoles[0]")
	assert.Equal(t, podRules, get(t, role, &rbacv1.ClusterRole{}).Rules, "an invalid template changes nothing")

	update(t, tmpl, func() {
		tmpl.Spec.ClusterRoles = tmpl.Spec.ClusterRoles[:1]
		tmpl.Spec.BindingTemplate.Subjects = []rbacv1.Subject{{Kind: "Robot", Name: "r2"}}
	})
	eventuallyReady(t, tmpl.Name, metav1.ConditionFalse, oriav1alpha1.ReasonInvalidSubject)
	assert.Contains(t, readyMessage(t, tmpl.Name), `kind "Robot"`)
}

// TestDesignDocumentExample: the design document's ScopeTemplate, with the
// apiVersion changed and its empty `namespace:` placeholder left out (a null
// string fails the schema), is accepted; it names a ServiceAccount
// "fooServiceAccount", which cannot exist, and says so. The sample (the same
// with a valid name) is valid and its generateName gives a stable name.
func TestDesignDocumentExample(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	design := strings.ReplaceAll(`apiVersion: oria.operatorframework.io/v1alpha1
kind: ScopeTemplate
metadata:
  name: NAME
spec:
  clusterRoles: # Any number of clusterRoles can be defined
    - generateName: fooClusterRole-
      rules:
      - apiGroups:
        - ""
        resources:
        - pods
        - services
        verbs:
        - get
        - list
        - create
        - update
        - delete
        - patch
        - watch
  bindingTemplate:
    subjects: # Supports multiple subjects, could be limited to one.
    - kind: ServiceAccount # MVP can support users, groups, and serviceAccounts.
      name: fooServiceAccount
`, "NAME", testutil.UniqueName("foo"))
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(design), &u.Object))
	require.NoError(t, k8sClient.Patch(ctx, u, client.Apply, client.FieldOwner("kubectl"), client.FieldValidation("Strict"))) //nolint:staticcheck // unstructured apply, as kubectl apply --server-side
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, u) })
	eventuallyReady(t, u.GetName(), metav1.ConditionFalse, oriav1alpha1.ReasonInvalidSubject)
	assert.Contains(t, readyMessage(t, u.GetName()), `ServiceAccount name "fooServiceAccount" is not valid`)

	b, err := os.ReadFile(filepath.Join(localcluster.RepoRoot(), "config", "samples", "scopetemplate.yaml"))
	require.NoError(t, err)
	sample := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal(b, &sample.Object))
	sample.SetName(testutil.UniqueName("foo"))
	testutil.Create(t, k8sClient, sample, client.FieldValidation("Strict"))
	st := eventuallyReady(t, sample.GetName(), metav1.ConditionTrue, oriav1alpha1.ReasonValid)
	require.Len(t, st.Status.ClusterRoles, 1)
	assert.Equal(t, "fooClusterRole-"+names.Hash(sample.GetName(), "fooClusterRole-"), st.Status.ClusterRoles[0])
	assert.Equal(t, []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "foo-service-account"}}, st.Spec.BindingTemplate.Subjects)
}

// TestUnchangedWorldWritesNothing: once converged, a reconcile makes zero
// writes, status included, for a template in use, unused, and invalid.
func TestUnchangedWorldWritesNothing(t *testing.T) {
	testutil.NeedCluster(t)
	used := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{
		{GenerateName: "quiet-", Rules: podRules}, {Name: "view"},
	}, testutil.User("alice"))
	unused := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{GenerateName: "quiet-", Rules: podRules}}, testutil.User("alice"))
	invalid := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, rbacv1.Subject{Kind: "Robot", Name: "r"})
	for _, tmpl := range []*oriav1alpha1.ScopeTemplate{used, unused, invalid} {
		create(t, tmpl)
	}
	create(t, newInstance(testutil.UniqueName("si"), used.Name))
	eventuallyReady(t, used.Name, metav1.ConditionTrue, oriav1alpha1.ReasonValid)
	eventuallyReady(t, unused.Name, metav1.ConditionTrue, oriav1alpha1.ReasonValid)
	eventuallyReady(t, invalid.Name, metav1.ConditionFalse, oriav1alpha1.ReasonInvalidSubject)
	testutil.EventuallyGet(t, k8sClient, clusterRole("quiet-"+names.Hash(used.Name, "quiet-")))

	c, counter := testutil.CountingClient(mgr.GetClient())
	d := deps
	d.Client, d.Recorder = c, &events.FakeRecorder{}
	r, err := scopetemplate.New(d, scopetemplate.Options{})
	require.NoError(t, err)
	for _, name := range []string{used.Name, unused.Name, invalid.Name} {
		req := reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}
		// The cache may lag the API server by a moment: wait until a
		// reconcile is quiet, then require the next one to be quiet too.
		testutil.EventuallyQuiet(t, r, counter, req)
		testutil.Quiet(t, r, counter, req, 1)
	}
}
