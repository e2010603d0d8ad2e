package scopeinstance_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestNamespacesAreLive covers a selector, switching between the selector
// and a list, and namespaces created, relabelled, unlabelled and deleted
// while the instance exists.
func TestNamespacesAreLive(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	team := testutil.UniqueName("team")
	listed := namespace(t, "listed", map[string]string{"team": team})
	selected := namespace(t, "selected", map[string]string{"team": team})
	other := namespace(t, "other", nil)

	view := podReader(t)
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: view}}, testutil.ServiceAccount("bot", ""), testutil.User("alice"))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, nil, matchLabels("team", team))
	create(t, si)

	got := eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	eventuallyBoundIn(t, si.Name, view, listed, selected)
	assert.Equal(t, oriav1alpha1.ScopeNamespaces, got.Status.Scope)
	assert.ElementsMatch(t, []string{listed, selected}, got.Status.BoundNamespaces)
	assert.EqualValues(t, 2, got.Status.BoundNamespaceCount)

	// The binding as a user sees it: name, labels, owner, roleRef, and the
	// ServiceAccount of the binding's namespace.
	rb := get(t, binding.BindingName(si.Name, view), selected, &rbacv1.RoleBinding{})
	assert.Equal(t, map[string]string{
		oriav1alpha1.LabelManaged:       oriav1alpha1.ManagedValue,
		oriav1alpha1.LabelManagedBy:     oriav1alpha1.ManagedByValue,
		oriav1alpha1.LabelScopeInstance: si.Name,
		oriav1alpha1.LabelScopeTemplate: tmpl.Name,
	}, rb.Labels)
	require.Len(t, rb.OwnerReferences, 1)
	assert.Equal(t, si.UID, rb.OwnerReferences[0].UID)
	assert.True(t, *rb.OwnerReferences[0].Controller)
	assert.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: view}, rb.RoleRef)
	assert.Equal(t, []rbacv1.Subject{
		{Kind: rbacv1.ServiceAccountKind, Name: "bot", Namespace: selected},
		testutil.User("alice"),
	}, rb.Subjects)
	allowed, err := testutil.Allowed(ctx, k8sClient, testutil.Access{
		User: "system:serviceaccount:" + selected + ":bot", Verb: "list", Resource: "pods", Namespace: selected})
	require.NoError(t, err)
	assert.True(t, allowed, "the namespace's ServiceAccount may list pods")

	// A new matching namespace is bound.
	created := namespace(t, "created", map[string]string{"team": team})
	eventuallyBoundIn(t, si.Name, view, listed, selected, created)

	// A namespace relabelled to match is bound; one unlabelled loses it.
	ns := testutil.Namespace(other, nil)
	update(t, ns, func() {
		ns.Labels = map[string]string{"team": team}
	})
	ns = testutil.Namespace(selected, nil)
	update(t, ns, func() {
		delete(ns.Labels, "team")
	})
	eventuallyBoundIn(t, si.Name, view, listed, created, other)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, _ := ready(c, si.Name)
		assert.Equal(c, []string{created, listed, other}, sorted(got.Status.BoundNamespaces))
	}, testutil.Timeout, testutil.Interval)

	// From the selector to a list and back: exactly the bindings of the
	// namespaces that leave go.
	update(t, si, func() { si.Spec.NamespaceSelector, si.Spec.Namespaces = nil, []string{listed, created} })
	eventuallyBoundIn(t, si.Name, view, listed, created)
	update(t, si, func() { si.Spec.NamespaceSelector, si.Spec.Namespaces = matchLabels("team", team), nil })
	eventuallyBoundIn(t, si.Name, view, listed, created, other)

	// A deleted namespace (terminating for good here: no namespace
	// controller runs) leaves the bound list; nothing is created there.
	require.NoError(t, k8sClient.Delete(ctx, testutil.Namespace(created, nil)))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, cond := ready(c, si.Name)
		assert.Equal(c, []string{listed, other}, sorted(got.Status.BoundNamespaces))
		if assert.NotNil(c, cond) {
			assert.Equal(c, oriav1alpha1.ReasonBound, cond.Reason)
		}
	}, testutil.Timeout, testutil.Interval)
}

// TestMissingNamespaceIsBoundWhenCreated: a listed namespace that does not
// exist is reported, the others are bound, and it is bound once created.
func TestMissingNamespaceIsBoundWhenCreated(t *testing.T) {
	testutil.NeedCluster(t)
	present := namespace(t, "present", nil)
	missing := testutil.UniqueName("missing")

	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User("alice"))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{present, missing}, nil)
	create(t, si)

	got := eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonNamespaceNotFound)
	_, cond := ready(t, si.Name)
	assert.Contains(t, cond.Message, missing)
	assert.Equal(t, []string{present}, got.Status.BoundNamespaces)
	eventuallyBoundIn(t, si.Name, "view", present)

	create(t, testutil.Namespace(missing, nil))
	eventuallyBoundIn(t, si.Name, "view", present, missing)
	got = eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	assert.Equal(t, sorted([]string{present, missing}), got.Status.BoundNamespaces)
}

// TestClusterWide: neither namespaces nor selector binds with one
// ClusterRoleBinding per role; a ServiceAccount without namespace cannot be
// bound cluster-wide; moving to namespaces replaces the ClusterRoleBindings.
func TestClusterWide(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns := namespace(t, "cw", nil)
	view := podReader(t)
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: view}, {Name: "edit"}},
		testutil.ServiceAccount("bot", ns), testutil.User("bob"))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, nil, nil)
	create(t, si)

	got := eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	assert.Equal(t, oriav1alpha1.ScopeCluster, got.Status.Scope)
	assert.Empty(t, got.Status.BoundNamespaces)
	for _, role := range []string{view, "edit"} {
		crb := get(t, binding.BindingName(si.Name, role), "", &rbacv1.ClusterRoleBinding{})
		assert.Equal(t, role, crb.RoleRef.Name)
		assert.Equal(t, []rbacv1.Subject{testutil.ServiceAccount("bot", ns), testutil.User("bob")}, crb.Subjects)
		assert.Equal(t, si.Name, crb.Labels[oriav1alpha1.LabelScopeInstance])
	}
	allowed, err := testutil.Allowed(ctx, k8sClient, testutil.Access{User: "bob", Verb: "list", Resource: "pods", Namespace: "kube-system"})
	require.NoError(t, err)
	assert.True(t, allowed, "cluster-wide view lets bob list pods everywhere")

	// A ServiceAccount without namespace is invalid cluster-wide; nothing
	// is removed while the spec is wrong.
	update(t, tmpl, func() {
		tmpl.Spec.BindingTemplate.Subjects = append(tmpl.Spec.BindingTemplate.Subjects, testutil.ServiceAccount("nons", ""))
	})
	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonInvalidSubject)
	_, cond := ready(t, si.Name)
	assert.Contains(t, cond.Message, `ServiceAccount "nons" has no namespace`)
	get(t, binding.BindingName(si.Name, view), "", &rbacv1.ClusterRoleBinding{})

	// Scoped to a namespace: RoleBindings there, ClusterRoleBindings gone.
	update(t, si, func() {
		si.Spec.Namespaces = []string{ns}
	})
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	eventuallyBoundIn(t, si.Name, view, ns)
	eventuallyBoundIn(t, si.Name, "edit", ns)
	testutil.EventuallyGone(t, k8sClient, clusterRoleBinding(binding.BindingName(si.Name, view)), clusterRoleBinding(binding.BindingName(si.Name, "edit")))
}

// TestTerminatingNamespaceIsSkipped: a terminating namespace gets no create
// attempts and raises no error; its existing bindings are left to the
// namespace controller.
func TestTerminatingNamespaceIsSkipped(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	team := testutil.UniqueName("team")
	live := namespace(t, "live", map[string]string{"team": team})
	dying := namespace(t, "dying", map[string]string{"team": team})
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User("alice"))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, nil, matchLabels("team", team))
	create(t, si)
	eventuallyBoundIn(t, si.Name, "view", live, dying)

	// Without kube-controller-manager the namespace stays terminating.
	require.NoError(t, k8sClient.Delete(ctx, testutil.Namespace(dying, nil)))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, cond := ready(c, si.Name)
		assert.Equal(c, []string{live}, got.Status.BoundNamespaces)
		if assert.NotNil(c, cond) {
			assert.Equal(c, oriav1alpha1.ReasonBound, cond.Reason)
		}
	}, testutil.Timeout, testutil.Interval)
	// The binding there is kept (the namespace controller removes it).
	get(t, binding.BindingName(si.Name, "view"), dying, &rbacv1.RoleBinding{})

	// Even with its binding gone, a reconcile writes nothing there and
	// reports no error.
	require.NoError(t, k8sClient.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: binding.BindingName(si.Name, "view"), Namespace: dying}}))
	r, counter := countingReconciler(t)
	testutil.EventuallyQuiet(t, r, counter, reconcile.Request{NamespacedName: types.NamespacedName{Name: si.Name}})
	assert.True(t, notFound(binding.BindingName(si.Name, "view"), dying, &rbacv1.RoleBinding{}))
}

func sorted(s []string) []string {
	return slices.Sorted(slices.Values(s))
}

// TestOneBadNamespaceDoesNotBlockTheOthers: a namespace where the API server
// refuses the RoleBinding (here an admission policy) is reported and
// retried; the other namespaces are bound meanwhile, and the bad one is
// bound once the refusal stops.
func TestOneBadNamespaceDoesNotBlockTheOthers(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	deny := testutil.UniqueName("deny")
	good1 := namespace(t, "good", nil)
	bad := namespace(t, "bad", map[string]string{"deny-rolebindings": deny})
	good2 := namespace(t, "good", nil)

	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: deny},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"deny-rolebindings": deny}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule: admissionregistrationv1.Rule{
							APIGroups: []string{rbacv1.GroupName}, APIVersions: []string{"v1"}, Resources: []string{"rolebindings"},
						},
					},
				}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "RoleBindings are not allowed here (test)"}},
		},
	}
	create(t, policy)
	create(t, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: deny},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        deny,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	})
	// The policy takes effect asynchronously.
	require.Eventually(t, func() bool {
		probe := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: bad},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
			Subjects:   []rbacv1.Subject{testutil.User("probe")},
		}
		if err := k8sClient.Create(ctx, probe); err == nil {
			_ = k8sClient.Delete(ctx, probe)
			return false
		}
		return true
	}, testutil.Timeout, testutil.Interval)

	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User("alice"))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{good1, bad, good2}, nil)
	create(t, si)

	got := eventuallyReady(t, si.Name, metav1.ConditionUnknown, oriav1alpha1.ReasonReconcileError)
	_, cond := ready(t, si.Name)
	assert.Contains(t, cond.Message, bad)
	assert.Contains(t, cond.Message, "RoleBindings are not allowed here")
	assert.ElementsMatch(t, []string{good1, good2}, got.Status.BoundNamespaces)
	eventuallyBoundIn(t, si.Name, "view", good1, good2)

	require.NoError(t, k8sClient.Delete(ctx, policy))
	eventuallyBoundIn(t, si.Name, "view", good1, bad, good2)
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
}
