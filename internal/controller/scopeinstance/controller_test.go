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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/controller/scopeinstance"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestNamespacesAreLive covers the union of the list and the selector, and
// namespaces created, relabelled, unlabelled and deleted while the instance
// exists.
func TestNamespacesAreLive(t *testing.T) {
	testutil.NeedCluster(t, cluster)
	ctx := context.Background()
	team := testutil.UniqueName("team")
	listed := namespace(t, "listed", nil)
	selected := namespace(t, "selected", map[string]string{"team": team})
	other := namespace(t, "other", nil)

	view := podReader(t)
	tmpl := newTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: view}}, sa("bot", ""), user("alice"))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{listed}, matchLabels("team", team))
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
		user("alice"),
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
	}, timeout, interval)

	// A namespace removed from the list loses exactly its binding.
	update(t, si, func() { si.Spec.Namespaces = nil })
	eventuallyBoundIn(t, si.Name, view, created, other)
	update(t, si, func() { si.Spec.Namespaces = []string{listed} })
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
	}, timeout, interval)
}

// TestMissingNamespaceIsBoundWhenCreated: a listed namespace that does not
// exist is reported, the others are bound, and it is bound once created.
func TestMissingNamespaceIsBoundWhenCreated(t *testing.T) {
	testutil.NeedCluster(t, cluster)
	present := namespace(t, "present", nil)
	missing := testutil.UniqueName("missing")

	tmpl := newTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, user("alice"))
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
	testutil.NeedCluster(t, cluster)
	ctx := context.Background()
	ns := namespace(t, "cw", nil)
	view := podReader(t)
	tmpl := newTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: view}, {Name: "edit"}},
		sa("bot", ns), user("bob"))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, nil, nil)
	create(t, si)

	got := eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	assert.Equal(t, oriav1alpha1.ScopeCluster, got.Status.Scope)
	assert.Empty(t, got.Status.BoundNamespaces)
	for _, role := range []string{view, "edit"} {
		crb := get(t, binding.BindingName(si.Name, role), "", &rbacv1.ClusterRoleBinding{})
		assert.Equal(t, role, crb.RoleRef.Name)
		assert.Equal(t, []rbacv1.Subject{sa("bot", ns), user("bob")}, crb.Subjects)
		assert.Equal(t, si.Name, crb.Labels[oriav1alpha1.LabelScopeInstance])
	}
	allowed, err := testutil.Allowed(ctx, k8sClient, testutil.Access{User: "bob", Verb: "list", Resource: "pods", Namespace: "kube-system"})
	require.NoError(t, err)
	assert.True(t, allowed, "cluster-wide view lets bob list pods everywhere")

	// A ServiceAccount without namespace is invalid cluster-wide; nothing
	// is removed while the spec is wrong.
	update(t, tmpl, func() {
		tmpl.Spec.BindingTemplate.Subjects = append(tmpl.Spec.BindingTemplate.Subjects, sa("nons", ""))
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
	require.Eventually(t, func() bool {
		return notFound(t, binding.BindingName(si.Name, view), "", &rbacv1.ClusterRoleBinding{}) &&
			notFound(t, binding.BindingName(si.Name, "edit"), "", &rbacv1.ClusterRoleBinding{})
	}, timeout, interval)
}

// TestMissingTemplate: TemplateNotFound until the template is created; when
// it is deleted the bindings stay and the instance says why.
func TestMissingTemplate(t *testing.T) {
	testutil.NeedCluster(t, cluster)
	ns := namespace(t, "mt", nil)
	tmplName := testutil.UniqueName("tmpl")
	si := newInstance(testutil.UniqueName("si"), tmplName, []string{ns}, nil)
	create(t, si)

	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonTemplateNotFound)
	_, cond := ready(t, si.Name)
	assert.Contains(t, cond.Message, tmplName)

	tmpl := newTemplate(tmplName, []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, user("alice"))
	create(t, tmpl)
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	eventuallyBoundIn(t, si.Name, "view", ns)

	require.NoError(t, k8sClient.Delete(context.Background(), tmpl))
	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonTemplateNotFound)
	assert.Equal(t, []string{ns}, roleBindingNamespaces(t, si.Name, "view"), "bindings are kept while the template is missing")
}

// TestInvalidTemplate: an invalid template is reported on the instance;
// fixing it binds.
func TestInvalidTemplate(t *testing.T) {
	testutil.NeedCluster(t, cluster)
	ns := namespace(t, "it", nil)
	tmpl := newTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}},
		rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "Not_A_Name"})
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{ns}, nil)
	create(t, si)

	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonTemplateInvalid)
	_, cond := ready(t, si.Name)
	assert.Contains(t, cond.Message, "Not_A_Name")
	assert.Empty(t, roleBindingNamespaces(t, si.Name, "view"))

	update(t, tmpl, func() {
		tmpl.Spec.BindingTemplate.Subjects[0].Name = "a-name"
	})
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	eventuallyBoundIn(t, si.Name, "view", ns)
}

// TestInvalidSelector is terminal and disturbs nothing: the bindings made
// with the previous, valid selector stay.
func TestInvalidSelector(t *testing.T) {
	testutil.NeedCluster(t, cluster)
	team := testutil.UniqueName("team")
	ns := namespace(t, "is", map[string]string{"team": team})
	tmpl := newTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, user("alice"))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, nil, matchLabels("team", team))
	create(t, si)
	eventuallyBoundIn(t, si.Name, "view", ns)

	update(t, si, func() {
		si.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "team", Operator: "Near", Values: []string{team}},
		}}
	})
	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonInvalidSelector)
	_, cond := ready(t, si.Name)
	assert.Contains(t, cond.Message, `"Near" is not a valid label selector operator`)
	assert.Equal(t, []string{ns}, roleBindingNamespaces(t, si.Name, "view"))

	// The same holds for a selector the design document's shorthand made
	// unparseable (a misspelt matchLabels).
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(oriav1alpha1.GroupVersion.WithKind("ScopeInstance"))
	u.SetName(testutil.UniqueName("si"))
	require.NoError(t, unstructured.SetNestedField(u.Object, tmpl.Name, "spec", "scopeTemplateName"))
	require.NoError(t, unstructured.SetNestedField(u.Object, map[string]any{"matchLabel": map[string]any{"team": team}}, "spec", "namespaceSelector"))
	create(t, u)
	eventuallyReady(t, u.GetName(), metav1.ConditionFalse, oriav1alpha1.ReasonInvalidSelector)
}

// TestDesignDocumentSelector: the design document's bare-label selector
// (`namespaceSelector: {fooKey: barValue}`) selects by that label.
func TestDesignDocumentSelector(t *testing.T) {
	testutil.NeedCluster(t, cluster)
	value := testutil.UniqueName("v")
	match := namespace(t, "dd", map[string]string{"fooKey": value})
	namespace(t, "dd", map[string]string{"fooKey": "other"})
	tmpl := newTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, user("alice"))
	create(t, tmpl)

	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(oriav1alpha1.GroupVersion.WithKind("ScopeInstance"))
	u.SetName(testutil.UniqueName("si"))
	require.NoError(t, unstructured.SetNestedField(u.Object, tmpl.Name, "spec", "scopeTemplateName"))
	require.NoError(t, unstructured.SetNestedField(u.Object, map[string]any{"fooKey": value}, "spec", "namespaceSelector"))
	require.NoError(t, k8sClient.Create(context.Background(), u, client.FieldValidation("Strict")))
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), u) })

	got := eventuallyReady(t, u.GetName(), metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	assert.Equal(t, []string{match}, got.Status.BoundNamespaces)
	eventuallyBoundIn(t, u.GetName(), "view", match)
}

// TestConflict: a same-name RoleBinding oria did not create is reported and
// left alone; the other namespaces are bound; removing it lets oria bind.
func TestConflict(t *testing.T) {
	testutil.NeedCluster(t, cluster)
	ctx := context.Background()
	good := namespace(t, "good", nil)
	taken := namespace(t, "taken", nil)
	tmpl := newTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, user("alice"))
	create(t, tmpl)
	siName := testutil.UniqueName("si")
	foreign := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: binding.BindingName(siName, "view"), Namespace: taken, Labels: map[string]string{"mine": "yes"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{user("mallory")},
	}
	create(t, foreign)
	si := newInstance(siName, tmpl.Name, []string{good, taken}, nil)
	create(t, si)

	got := eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonConflict)
	_, cond := ready(t, si.Name)
	assert.Contains(t, cond.Message, foreign.Name)
	assert.Contains(t, cond.Message, taken)
	assert.Equal(t, []string{good}, got.Status.BoundNamespaces)
	eventuallyBoundIn(t, si.Name, "view", good)
	after := get(t, foreign.Name, taken, &rbacv1.RoleBinding{})
	assert.Equal(t, foreign.Labels, after.Labels, "the foreign binding is not modified")
	assert.Equal(t, "edit", after.RoleRef.Name)
	assert.Equal(t, []rbacv1.Subject{user("mallory")}, after.Subjects)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, eventReasons(c, si.Name), scopeinstance.EventConflict)
	}, timeout, interval)

	require.NoError(t, k8sClient.Delete(ctx, foreign))
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	eventuallyBoundIn(t, si.Name, "view", good, taken)
}

// TestDriftIsRepaired: deleted and edited bindings are restored.
func TestDriftIsRepaired(t *testing.T) {
	testutil.NeedCluster(t, cluster)
	ctx := context.Background()
	ns := namespace(t, "drift", nil)
	other := namespace(t, "drift", nil)
	tmpl := newTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, user("alice"))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{ns, other}, nil)
	create(t, si)
	eventuallyBoundIn(t, si.Name, "view", ns, other)
	name := binding.BindingName(si.Name, "view")

	// Deleted: recreated.
	orig := get(t, name, ns, &rbacv1.RoleBinding{})
	require.NoError(t, k8sClient.Delete(ctx, orig))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		rb := &rbacv1.RoleBinding{}
		if assert.NoError(c, k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, rb)) {
			assert.NotEqual(c, orig.UID, rb.UID)
		}
	}, timeout, interval)

	// Subjects edited: restored.
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	update(t, rb, func() {
		rb.Subjects = append(rb.Subjects, user("mallory"))
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, []rbacv1.Subject{user("alice")}, get(c, name, ns, &rbacv1.RoleBinding{}).Subjects)
	}, timeout, interval)

	// oria's labels removed (the object leaves oria's cache): restored,
	// since the ownerReference still says it is oria's.
	rb = &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: other}}
	update(t, rb, func() {
		rb.Labels = map[string]string{"kept": "yes"}
		rb.Subjects = []rbacv1.Subject{user("mallory")}
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := get(c, name, other, &rbacv1.RoleBinding{})
		assert.Equal(c, si.Name, got.Labels[oriav1alpha1.LabelScopeInstance])
		assert.Equal(c, "yes", got.Labels["kept"], "labels oria does not own are kept")
		assert.Equal(c, []rbacv1.Subject{user("alice")}, got.Subjects)
	}, timeout, interval)
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
}

// TestTemplateEditsReachInstances: subjects, rules and roles changed in the
// template reach the bindings of every instance using it.
func TestTemplateEditsReachInstances(t *testing.T) {
	testutil.NeedCluster(t, cluster)
	ctx := context.Background()
	ns1 := namespace(t, "te", nil)
	ns2 := namespace(t, "te", nil)
	tmpl := newTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{
		{Name: "view"},
		{GenerateName: "pods-", Rules: podRules},
	}, user("alice"))
	create(t, tmpl)
	si1 := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{ns1}, nil)
	si2 := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{ns2}, nil)
	create(t, si1)
	create(t, si2)
	inline := binding.RoleName(tmpl.Name, oriav1alpha1.ClusterRoleTemplate{GenerateName: "pods-", Rules: podRules})
	eventuallyReady(t, si1.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	eventuallyReady(t, si2.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	eventuallyBoundIn(t, si1.Name, inline, ns1)
	eventuallyBoundIn(t, si2.Name, inline, ns2)

	allowed := func(c *assert.CollectT, who, verb, ns string) bool {
		ok, err := testutil.Allowed(ctx, k8sClient, testutil.Access{User: who, Verb: verb, Resource: "pods", Namespace: ns})
		assert.NoError(c, err)
		return ok
	}

	// Subjects: bob replaces alice in both namespaces.
	update(t, tmpl, func() {
		tmpl.Spec.BindingTemplate.Subjects = []rbacv1.Subject{user("bob")}
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, ns := range []string{ns1, ns2} {
			assert.True(c, allowed(c, "bob", "list", ns), "bob in %s", ns)
			assert.False(c, allowed(c, "alice", "list", ns), "alice in %s", ns)
		}
	}, timeout, interval)

	// Rules: the inline role gains delete.
	update(t, tmpl, func() {
		tmpl.Spec.ClusterRoles[1].Rules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "delete"}}}
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.True(c, allowed(c, "bob", "delete", ns1))
		assert.True(c, allowed(c, "bob", "delete", ns2))
	}, timeout, interval)

	// Roles: view becomes edit, a different roleRef: the view bindings are
	// replaced by edit bindings.
	update(t, tmpl, func() {
		tmpl.Spec.ClusterRoles[0].Name = "edit"
	})
	eventuallyBoundIn(t, si1.Name, "edit", ns1)
	eventuallyBoundIn(t, si2.Name, "edit", ns2)
	eventuallyBoundIn(t, si1.Name, "view", []string{}...)
	eventuallyBoundIn(t, si2.Name, "view", []string{}...)
	eventuallyBoundIn(t, si1.Name, inline, ns1)

	// Removing a role removes exactly its bindings (and the inline role).
	update(t, tmpl, func() {
		tmpl.Spec.ClusterRoles = tmpl.Spec.ClusterRoles[:1]
	})
	eventuallyBoundIn(t, si1.Name, inline, []string{}...)
	eventuallyBoundIn(t, si1.Name, "edit", ns1)
	require.Eventually(t, func() bool { return notFound(t, inline, "", &rbacv1.ClusterRole{}) }, timeout, interval)
}

// TestRoleRefChangeReplacesBinding: a binding of oria's whose roleRef
// differs (roleRef is immutable) is deleted and created again; one without
// the instance's ownerReference (say, left by a deleted instance of the same
// name) is adopted in place.
func TestRoleRefChangeReplacesBinding(t *testing.T) {
	testutil.NeedCluster(t, cluster)
	ns := namespace(t, "rr", nil)
	tmpl := newTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}, {Name: "edit"}}, user("alice"))
	create(t, tmpl)
	siName := testutil.UniqueName("si")

	// Bindings with the instance's labels, made before it exists: one with
	// another roleRef, one right but without owner.
	labels := map[string]string{
		oriav1alpha1.LabelManagedBy:     oriav1alpha1.ManagedByValue,
		oriav1alpha1.LabelScopeInstance: siName,
		oriav1alpha1.LabelScopeTemplate: tmpl.Name,
	}
	wrongRef := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: binding.BindingName(siName, "view"), Namespace: ns, Labels: labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects:   []rbacv1.Subject{user("alice")},
	}
	orphan := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: binding.BindingName(siName, "edit"), Namespace: ns, Labels: labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{user("alice")},
	}
	create(t, wrongRef)
	create(t, orphan)

	si := newInstance(siName, tmpl.Name, []string{ns}, nil)
	create(t, si)
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	si = get(t, si.Name, "", &oriav1alpha1.ScopeInstance{})

	replaced := get(t, wrongRef.Name, ns, &rbacv1.RoleBinding{})
	assert.Equal(t, "view", replaced.RoleRef.Name)
	assert.NotEqual(t, wrongRef.UID, replaced.UID, "replaced, not updated")
	adopted := get(t, orphan.Name, ns, &rbacv1.RoleBinding{})
	assert.Equal(t, orphan.UID, adopted.UID, "adopted in place")
	for _, rb := range []*rbacv1.RoleBinding{replaced, adopted} {
		require.Len(t, rb.OwnerReferences, 1)
		assert.Equal(t, si.UID, rb.OwnerReferences[0].UID)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, eventReasons(c, si.Name), scopeinstance.EventBindingsReplaced)
	}, timeout, interval)
}

// TestInlineRoleConflict: when a foreign ClusterRole holds the name of a
// template's inline role, nothing is bound to it.
func TestInlineRoleConflict(t *testing.T) {
	testutil.NeedCluster(t, cluster)
	ctx := context.Background()
	ns := namespace(t, "irc", nil)
	roleName := testutil.UniqueName("taken-role")
	foreign := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: roleName},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}},
	}
	create(t, foreign)
	tmpl := newTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: roleName, Rules: podRules}, {Name: "view"}}, user("alice"))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{ns}, nil)
	create(t, si)

	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonConflict)
	_, cond := ready(t, si.Name)
	assert.Contains(t, cond.Message, roleName)
	eventuallyBoundIn(t, si.Name, "view", ns)
	assert.Empty(t, roleBindingNamespaces(t, si.Name, roleName), "nothing binds the foreign role")
	allowed, err := testutil.Allowed(ctx, k8sClient, testutil.Access{User: "alice", Verb: "delete", Resource: "secrets", Namespace: ns})
	require.NoError(t, err)
	assert.False(t, allowed)

	// Once the foreign role is gone, the template creates its own and the
	// instance binds it.
	require.NoError(t, k8sClient.Delete(ctx, foreign))
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	eventuallyBoundIn(t, si.Name, roleName, ns)
}

// TestInstanceDeleteRemovesBindings: deleting the instance removes its
// bindings (no garbage collector runs here: oria does it).
func TestInstanceDeleteRemovesBindings(t *testing.T) {
	testutil.NeedCluster(t, cluster)
	ctx := context.Background()
	ns := namespace(t, "del", nil)
	tmpl := newTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, user("alice"))
	create(t, tmpl)
	nsInst := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{ns}, nil)
	cwInst := newInstance(testutil.UniqueName("si"), tmpl.Name, nil, nil)
	create(t, nsInst)
	create(t, cwInst)
	eventuallyBoundIn(t, nsInst.Name, "view", ns)
	eventuallyReady(t, cwInst.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)

	require.NoError(t, k8sClient.Delete(ctx, nsInst))
	require.NoError(t, k8sClient.Delete(ctx, cwInst))
	eventuallyBoundIn(t, nsInst.Name, "view", []string{}...)
	require.Eventually(t, func() bool {
		return notFound(t, binding.BindingName(cwInst.Name, "view"), "", &rbacv1.ClusterRoleBinding{})
	}, timeout, interval)
}

// TestTerminatingNamespaceIsSkipped: a terminating namespace gets no create
// attempts and raises no error; its existing bindings are left to the
// namespace controller.
func TestTerminatingNamespaceIsSkipped(t *testing.T) {
	testutil.NeedCluster(t, cluster)
	ctx := context.Background()
	team := testutil.UniqueName("team")
	live := namespace(t, "live", map[string]string{"team": team})
	dying := namespace(t, "dying", map[string]string{"team": team})
	tmpl := newTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, user("alice"))
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
	}, timeout, interval)
	// The binding there is kept (the namespace controller removes it).
	get(t, binding.BindingName(si.Name, "view"), dying, &rbacv1.RoleBinding{})

	// Even with its binding gone, a reconcile writes nothing there and
	// reports no error.
	require.NoError(t, k8sClient.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: binding.BindingName(si.Name, "view"), Namespace: dying}}))
	r, counter := countingReconciler()
	require.Eventually(t, func() bool {
		counter.Reset()
		_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: si.Name}})
		require.NoError(t, err)
		return counter.Total() == 0
	}, timeout, interval, "a reconcile with a terminating namespace writes nothing: %s", counter)
	assert.True(t, notFound(t, binding.BindingName(si.Name, "view"), dying, &rbacv1.RoleBinding{}))
}

// TestUnchangedWorldWritesNothing: once converged, a reconcile makes zero
// writes, status included.
func TestUnchangedWorldWritesNothing(t *testing.T) {
	testutil.NeedCluster(t, cluster)
	ctx := context.Background()
	team := testutil.UniqueName("team")
	var nss []string
	for range 5 {
		nss = append(nss, namespace(t, "quiet", map[string]string{"team": team}))
	}
	missing := testutil.UniqueName("absent")
	tmpl := newTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{
		{Name: "view"}, {GenerateName: "pods-", Rules: podRules},
	}, sa("bot", ""), user("alice"))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{missing}, matchLabels("team", team))
	cw := newInstance(testutil.UniqueName("si"), tmpl.Name, nil, nil) // InvalidSubject: a terminal state is quiet too
	create(t, si)
	create(t, cw)
	eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonNamespaceNotFound)
	eventuallyReady(t, cw.Name, metav1.ConditionFalse, oriav1alpha1.ReasonInvalidSubject)
	inline := binding.RoleName(tmpl.Name, oriav1alpha1.ClusterRoleTemplate{GenerateName: "pods-", Rules: podRules})
	eventuallyBoundIn(t, si.Name, inline, nss...)

	r, counter := countingReconciler()
	for _, name := range []string{si.Name, cw.Name} {
		// The cache may lag the API server by a moment: wait until a
		// reconcile is quiet, then require the next one to be quiet too.
		require.Eventually(t, func() bool {
			counter.Reset()
			_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
			require.NoError(t, err)
			return counter.Total() == 0
		}, timeout, interval)
		counter.Reset()
		_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
		require.NoError(t, err)
		assert.Zero(t, counter.Total(), "writes on an unchanged world: %s", counter)
	}
}

// countingReconciler returns a Reconciler on the package manager's cache
// whose writes are counted.
func countingReconciler() (*scopeinstance.Reconciler, *testutil.WriteCounter) {
	c, counter := testutil.CountingClient(mgr.GetClient())
	return &scopeinstance.Reconciler{Client: c, APIReader: mgr.GetAPIReader()}, counter
}

func sorted(s []string) []string {
	return slices.Sorted(slices.Values(s))
}

// TestOneBadNamespaceDoesNotBlockTheOthers: a namespace where the API server
// refuses the RoleBinding (here an admission policy) is reported and
// retried; the other namespaces are bound meanwhile, and the bad one is
// bound once the refusal stops.
func TestOneBadNamespaceDoesNotBlockTheOthers(t *testing.T) {
	testutil.NeedCluster(t, cluster)
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
			Subjects:   []rbacv1.Subject{user("probe")},
		}
		if err := k8sClient.Create(ctx, probe); err == nil {
			_ = k8sClient.Delete(ctx, probe)
			return false
		}
		return true
	}, timeout, interval)

	tmpl := newTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, user("alice"))
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
