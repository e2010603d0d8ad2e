package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestScopeInstanceStory is the design document's story: an operator's
// ServiceAccount, scoped by a ScopeInstance to namespaces foo and bar, may
// list pods there and not in baz; with no namespaces it may list them
// everywhere; with a selector, a namespace labelled to match gains access
// and one unlabelled loses it.
func TestScopeInstanceStory(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	operators := createNamespace(t, "operators", nil)
	foo := createNamespace(t, "foo", nil)
	bar := createNamespace(t, "bar", nil)
	baz := createNamespace(t, "baz", nil)

	// The ServiceAccount as the authorizer sees it.
	operator := func(verb, ns string) testutil.Access {
		return testutil.Access{
			User:   "system:serviceaccount:" + operators + ":operator",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + operators},
			Verb:   verb, Resource: "pods", Namespace: ns,
		}
	}

	tmpl := &oriav1alpha1.ScopeTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("story")},
		Spec: oriav1alpha1.ScopeTemplateSpec{
			ClusterRoles: []oriav1alpha1.ClusterRoleTemplate{{
				GenerateName: "pod-reader-",
				Rules:        []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}},
			}},
			BindingTemplate: oriav1alpha1.BindingTemplate{Subjects: []rbacv1.Subject{
				{Kind: rbacv1.ServiceAccountKind, Name: "operator", Namespace: operators},
			}},
		},
	}
	testutil.Create(t, k8sClient, tmpl)
	si := &oriav1alpha1.ScopeInstance{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("story")},
		Spec:       oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: tmpl.Name, Namespaces: []string{foo, bar}},
	}
	testutil.Create(t, k8sClient, si)

	// Scoped to foo and bar.
	got := waitScopeInstanceReady(t, si.Name)
	assert.Equal(t, oriav1alpha1.ScopeNamespaces, got.Status.Scope)
	assert.ElementsMatch(t, []string{foo, bar}, got.Status.BoundNamespaces)
	eventuallyAccess(t, true, operator("list", foo), operator("list", bar), operator("watch", foo))
	eventuallyAccess(t, false, operator("list", baz), operator("list", ""), operator("delete", foo))

	// No namespaces: cluster-wide.
	update(t, si, func() { si.Spec.Namespaces = nil })
	got = waitScopeInstanceReady(t, si.Name)
	assert.Equal(t, oriav1alpha1.ScopeCluster, got.Status.Scope)
	eventuallyAccess(t, true, operator("list", baz), operator("list", ""), operator("list", foo))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var rbs rbacv1.RoleBindingList
		assert.NoError(c, k8sClient.List(ctx, &rbs, client.MatchingLabels{oriav1alpha1.LabelScopeInstance: si.Name}))
		assert.Empty(c, rbs.Items, "cluster-wide, the RoleBindings are gone")
	}, testutil.Timeout, testutil.Interval)

	// A selector: only labelled namespaces.
	team := testutil.UniqueName("team")
	update(t, si, func() {
		si.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"story": team}}
	})
	eventuallyAccess(t, false, operator("list", foo), operator("list", baz), operator("list", ""))
	label(t, baz, map[string]string{"story": team})
	eventuallyAccess(t, true, operator("list", baz))
	label(t, foo, map[string]string{"story": team})
	eventuallyAccess(t, true, operator("list", foo), operator("list", baz))
	label(t, baz, nil)
	eventuallyAccess(t, false, operator("list", baz))
	eventuallyAccess(t, true, operator("list", foo))

	// A new namespace created with the label is bound at once.
	qux := createNamespace(t, "qux", map[string]string{"story": team})
	eventuallyAccess(t, true, operator("list", qux))
	// A namespace event changes no generation, and the binding is written
	// before the status: wait for the status itself.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &oriav1alpha1.ScopeInstance{}
		require.NoError(c, k8sClient.Get(ctx, client.ObjectKeyFromObject(si), got))
		assert.ElementsMatch(c, []string{foo, qux}, got.Status.BoundNamespaces)
	}, testutil.Timeout, testutil.Interval)

	// Deleting the instance revokes, and the template, no longer used,
	// removes its inline role.
	require.NoError(t, k8sClient.Delete(ctx, si))
	eventuallyAccess(t, false, operator("list", foo), operator("list", qux))
	st := &oriav1alpha1.ScopeTemplate{}
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKeyFromObject(tmpl), st))
	require.Len(t, st.Status.ClusterRoles, 1)
	inline := st.Status.ClusterRoles[0]
	// An unused template's inline role is removed.
	testutil.EventuallyGone(t, k8sClient, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: inline}})
}

// TestScopeSamples applies the ScopeTemplate and ScopeInstance samples (the
// design document's example): the ServiceAccount foo-service-account of
// namespaces foo and bar may manage pods and services there; with the
// document's selector instead of the list (`namespaceSelector: {fooKey:
// barValue}`, bare labels), so may that of every namespace labelled
// fooKey=barValue, and no longer those of foo and bar. Both together are
// refused.
func TestScopeSamples(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	for _, name := range []string{"foo", "bar"} {
		ns := testutil.Namespace(name, nil)
		if err := k8sClient.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
		t.Cleanup(func() { _ = k8sClient.Delete(ctx, ns) })
	}
	labelled := createNamespace(t, "labelled", map[string]string{"fooKey": "barValue"})
	unlabelled := createNamespace(t, "unlabelled", nil)
	fooSA := func(verb, resource, ns string) testutil.Access {
		return testutil.Access{
			User:   "system:serviceaccount:" + ns + ":foo-service-account",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns},
			Verb:   verb, Resource: resource, Namespace: ns,
		}
	}

	applySample(t, "scopetemplate.yaml")
	applySample(t, "scopeinstance.yaml")
	got := waitScopeInstanceReady(t, "foo")
	assert.ElementsMatch(t, []string{"foo", "bar"}, got.Status.BoundNamespaces)
	eventuallyAccess(t, true, fooSA("list", "pods", "foo"), fooSA("delete", "pods", "bar"))
	eventuallyAccess(t, false, fooSA("list", "pods", labelled), fooSA("list", "secrets", "foo"))

	// The document's selector, added to the list as it writes it: refused,
	// naming both fields.
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "foo"}}
	err := k8sClient.Patch(ctx, si, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"namespaceSelector":{"fooKey":"barValue"}}}`)))
	invalid(t, err, "spec.namespaceSelector", "namespaces and namespaceSelector are mutually exclusive")
	// Instead of the list: the labelled namespace, and only it.
	require.NoError(t, k8sClient.Patch(ctx, si, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"namespaces":null,"namespaceSelector":{"fooKey":"barValue"}}}`))))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &oriav1alpha1.ScopeInstance{}
		require.NoError(c, k8sClient.Get(ctx, client.ObjectKey{Name: "foo"}, got))
		assert.Equal(c, []string{labelled}, got.Status.BoundNamespaces)
	}, testutil.Timeout, testutil.Interval)
	eventuallyAccess(t, true, fooSA("create", "services", labelled))
	eventuallyAccess(t, false, fooSA("list", "pods", unlabelled), fooSA("list", "pods", "foo"), fooSA("list", "secrets", labelled))

	// The generated role and the bindings are owned as documented.
	st := &oriav1alpha1.ScopeTemplate{}
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKey{Name: "foo"}, st))
	require.Len(t, st.Status.ClusterRoles, 1)
	assert.Regexp(t, `^fooClusterRole-[0-9a-f]{10}$`, st.Status.ClusterRoles[0])
	assert.Equal(t, []string{"foo"}, st.Status.Instances)
	rb := &rbacv1.RoleBinding{}
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKey{Namespace: labelled, Name: binding.BindingName("foo", st.Status.ClusterRoles[0])}, rb))
	assert.Equal(t, "foo", rb.Labels[oriav1alpha1.LabelScopeInstance])
	assert.Equal(t, []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "foo-service-account", Namespace: labelled}}, rb.Subjects)
}

// TestScopeGarbageCollection: bindings carry ownerReferences, so the garbage
// collector removes them too. In a foreground deletion oria leaves the
// dependents to the collector (the instance still exists while they go), so
// this checks the ownerReferences, not oria's own cleanup.
func TestScopeGarbageCollection(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns := createNamespace(t, "gc", nil)
	tmpl := &oriav1alpha1.ScopeTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("gc")},
		Spec: oriav1alpha1.ScopeTemplateSpec{
			ClusterRoles:    []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}},
			BindingTemplate: oriav1alpha1.BindingTemplate{Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "gc-user"}}},
		},
	}
	testutil.Create(t, k8sClient, tmpl)
	si := &oriav1alpha1.ScopeInstance{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("gc")},
		Spec:       oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: tmpl.Name, Namespaces: []string{ns}},
	}
	require.NoError(t, k8sClient.Create(ctx, si))
	waitScopeInstanceReady(t, si.Name)
	user := testutil.Access{User: "gc-user", Verb: "list", Resource: "pods", Namespace: ns}
	eventuallyAccess(t, true, user)

	require.NoError(t, k8sClient.Delete(ctx, si, client.PropagationPolicy(metav1.DeletePropagationForeground)))
	testutil.EventuallyGone(t, k8sClient, si)
	eventuallyAccess(t, false, user)
}

// waitScopeInstanceReady waits until the instance is Ready=True for its
// current generation.
func waitScopeInstanceReady(t *testing.T, name string) *oriav1alpha1.ScopeInstance {
	t.Helper()
	si, _ := testutil.EventuallyCondition(t, k8sClient, &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: name}},
		testutil.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionTrue})
	return si
}

// createNamespace creates a namespace named prefix-<random> and deletes it
// when the test ends.
func createNamespace(t *testing.T, prefix string, labels map[string]string) string {
	t.Helper()
	return testutil.CreateNamespace(t, k8sClient, prefix, labels)
}

// label replaces a namespace's labels.
func label(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	update(t, ns, func() { ns.Labels = labels })
}

// update reads obj, applies change and writes it back, again if oria
// wrote the status in between.
func update[T client.Object](t *testing.T, obj T, change func()) {
	t.Helper()
	testutil.Update(t, k8sClient, obj, change)
}
