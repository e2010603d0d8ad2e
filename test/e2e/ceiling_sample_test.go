package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/reconciler"
	"github.com/operator-framework/oria/internal/testutil"
)

// recheck bounds the wait for oria to retry a refused binding (it looks
// again every 30 s).
const recheck = 75 * time.Second

// ceiling creates the ServiceAccount ns/name and, in each of namespaces, a
// Role granting it rules plus what writing RoleBindings takes, bound to it.
func ceiling(t *testing.T, ns, name string, rules []rbacv1.PolicyRule, namespaces ...string) {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	require.NoError(t, k8sClient.Create(ctx, sa))
	cleanup(t, sa)
	for _, n := range namespaces {
		grantCeiling(t, ns, name, n, append([]rbacv1.PolicyRule{{
			APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: []string{"get", "create", "update", "patch"},
		}}, rules...))
	}
}

// grantCeiling gives the ServiceAccount ns/name rules in namespace n.
func grantCeiling(t *testing.T, ns, name, n string, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: n, GenerateName: name + "-"}, Rules: rules}
	require.NoError(t, k8sClient.Create(ctx, role))
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	require.NoError(t, k8sClient.Create(ctx, rb))
	cleanup(t, role, rb)
}

func readyOf(t require.TestingT, obj client.Object, conds func() []metav1.Condition) *metav1.Condition {
	require.NoError(t, k8sClient.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	return meta.FindStatusCondition(conds(), oriav1alpha1.TypeReady)
}

// TestCeilingScopeInstance: the sample's ScopeTemplate asks for pods and
// secrets; its ScopeInstance names a ceiling ServiceAccount that holds pods
// only. The operator gets pods in all three namespaces and secrets in none,
// and the instance says which permission was refused to which
// ServiceAccount. Granting the ceiling secrets in one namespace lets that
// namespace's binding appear, with no other change.
func TestCeilingScopeInstance(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	for _, n := range []string{"widget-system", "widgets-a", "widgets-b", "widgets-c"} {
		ns := testutil.Namespace(n, nil)
		require.NoError(t, k8sClient.Create(ctx, ns))
		cleanup(t, ns)
	}
	pods := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}
	secrets := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}}
	ceiling(t, "widget-system", "widget-ceiling", []rbacv1.PolicyRule{pods}, "widgets-a", "widgets-b", "widgets-c")
	applySample(t, "scopeinstance-ceiling.yaml")

	operator := func(verb, resource, ns string) testutil.Access {
		return testutil.Access{User: "system:serviceaccount:widget-system:widget-operator",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:widget-system"}, Verb: verb, Resource: resource, Namespace: ns}
	}
	eventuallyAccess(t, true, operator("list", "pods", "widgets-a"), operator("list", "pods", "widgets-b"), operator("list", "pods", "widgets-c"))
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "widget-operator"}}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cond := readyOf(c, si, func() []metav1.Condition { return si.Status.Conditions })
		if assert.NotNil(c, cond) {
			assert.Equal(c, oriav1alpha1.ReasonForbidden, cond.Reason, cond.Message)
			assert.Contains(c, cond.Message, "system:serviceaccount:widget-system:widget-ceiling")
			assert.Contains(c, cond.Message, "secrets")
			assert.Contains(c, cond.Message, "widgets-a")
		}
		// Once both inline roles exist: a reconcile that ran while the
		// ScopeTemplate controller had written only one of them says
		// Forbidden too, with the other role's bindings not yet made.
		assert.Empty(c, si.Status.BoundNamespaces, "no namespace has every binding")
		assert.EqualValues(c, 3, si.Status.PartiallyBoundNamespaceCount, "the bindings the ceiling allows are in place in the three namespaces")
	}, time.Minute, 200*time.Millisecond)
	t.Log(meta.FindStatusCondition(si.Status.Conditions, oriav1alpha1.TypeReady).Message)
	forbiddenWarningArrives(t, si)
	for _, ns := range []string{"widgets-a", "widgets-b", "widgets-c"} {
		assert.False(t, can(t, operator("get", "secrets", ns)), "secrets granted in %s beyond the ceiling", ns)
	}

	// The ceiling gains secrets in widgets-b: that binding appears there.
	grantCeiling(t, "widget-system", "widget-ceiling", "widgets-b", []rbacv1.PolicyRule{secrets})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.True(c, can(c, operator("get", "secrets", "widgets-b")))
	}, recheck, time.Second)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		readyOf(c, si, func() []metav1.Condition { return si.Status.Conditions })
		assert.Equal(c, []string{"widgets-b"}, si.Status.BoundNamespaces)
	}, recheck, time.Second)
	for _, ns := range []string{"widgets-a", "widgets-c"} {
		assert.False(t, can(t, operator("get", "secrets", ns)), "secrets granted in %s beyond the ceiling", ns)
	}
}

// TestCeilingRBACPolicy: the same ceiling through an RBACPolicy, and a
// user who may not impersonate the ServiceAccount cannot name it.
func TestCeilingRBACPolicy(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	crd := extensionWithAPI(t, oriav1alpha1.RBACModeFineGrained)
	saNS := createNamespace(t, "ceiling", nil)
	n1, n2 := createNamespace(t, "att-a", nil), createNamespace(t, "att-b", nil)
	view := []rbacv1.PolicyRule{
		{APIGroups: []string{crd.Spec.Group}, Resources: []string{crd.Spec.Names.Plural}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, ResourceNames: []string{crd.Name}, Verbs: []string{"get"}},
	}
	ceiling(t, saNS, "ceiling", view, n1)

	p := &oriav1alpha1.RBACPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("capped")},
		Spec: oriav1alpha1.RBACPolicySpec{
			ExtensionName: crd.Labels[oriav1alpha1.LabelOLMOwnerName], Access: oriav1alpha1.AccessView,
			Subjects:       []rbacv1.Subject{testutil.User("dora")},
			Namespaces:     []string{n1, n2},
			APIs:           []oriav1alpha1.APIRef{{Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural}},
			ServiceAccount: &oriav1alpha1.ServiceAccountReference{Namespace: saNS, Name: "ceiling"},
		},
	}

	// A delegated user who may not impersonate the ceiling cannot name it.
	bob, asBob := delegate(t, "bob")
	refused(t, asBob.Create(ctx, p.DeepCopy()), `may not name ServiceAccount "ceiling"`, `"impersonate" on serviceaccounts/ceiling`)

	// Allowed to impersonate it, bob may: what he grants is capped by it.
	imp := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: saNS, Name: "impersonate-ceiling"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: []string{"ceiling"}, Verbs: []string{"impersonate"}}}}
	impRB := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: saNS, Name: "impersonate-ceiling"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: imp.Name}, Subjects: []rbacv1.Subject{testutil.User(bob)}}
	for _, o := range []client.Object{imp, impRB} {
		require.NoError(t, k8sClient.Create(ctx, o))
	}
	cleanup(t, imp, impRB)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NoError(c, asBob.Create(ctx, p.DeepCopy()))
	}, 30*time.Second, 200*time.Millisecond)
	cleanup(t, p)

	// Dropping the ceiling is a grant without one: bob may not bind the
	// extension's roles himself, so the guard refuses.
	refused(t, userUpdate(t, asBob, p, func() { p.Spec.ServiceAccount = nil }), "may not bind ClusterRole")
	dora := func(ns string) testutil.Access {
		return testutil.Access{User: "dora", Verb: "list", Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural, Namespace: ns}
	}
	eventuallyAccess(t, true, dora(n1))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cond := readyOf(c, p, func() []metav1.Condition { return p.Status.Conditions })
		if assert.NotNil(c, cond) {
			assert.Equal(c, oriav1alpha1.ReasonForbidden, cond.Reason, cond.Message)
			assert.Contains(c, cond.Message, "system:serviceaccount:"+saNS+":ceiling")
			assert.Contains(c, cond.Message, n2)
		}
	}, time.Minute, 200*time.Millisecond)
	assert.False(t, can(t, dora(n2)), "granted beyond the ceiling in %s", n2)
}

// forbiddenWarningArrives checks the documented Warning event of a Forbidden
// instance: its Ready message (every refused permission of the ceiling) is
// longer than the API server lets an Event's note be, so the event carries
// it cut to the limit, marked with "…", while the condition keeps the full
// text.
func forbiddenWarningArrives(t *testing.T, si *oriav1alpha1.ScopeInstance) {
	t.Helper()
	full := meta.FindStatusCondition(si.Status.Conditions, oriav1alpha1.TypeReady).Message
	require.Greater(t, len(full), reconciler.MaxEventNote, "the Forbidden message must exceed an Event's limit for this check to mean anything")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var list eventsv1.EventList
		require.NoError(c, k8sClient.List(context.Background(), &list))
		var notes []string
		for _, e := range list.Items {
			if e.Type == corev1.EventTypeWarning && e.Regarding.UID == si.UID && e.Reason == oriav1alpha1.ReasonForbidden {
				notes = append(notes, e.Note)
			}
		}
		if assert.NotEmpty(c, notes, "no Warning event Forbidden for ScopeInstance %s", si.Name) {
			for _, n := range notes {
				assert.LessOrEqual(c, len(n), reconciler.MaxEventNote)
				assert.True(c, utf8.ValidString(n))
				assert.True(c, strings.HasSuffix(n, "…"), "the note is marked as cut: %q", n)
				assert.Contains(c, n, "system:serviceaccount:widget-system:widget-ceiling")
			}
		}
	}, time.Minute, 200*time.Millisecond)
}
