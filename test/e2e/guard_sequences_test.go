package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriaac "github.com/operator-framework/oria/api/applyconfiguration/api/v1alpha1"
	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	policymodel "github.com/operator-framework/oria/internal/policy"
	"github.com/operator-framework/oria/internal/testutil"
)

// These tests are sequences of writes, each admissible on its own, by a
// delegated user (create, update and patch on oria's kinds, admin of a
// namespace of their own) and an admin, which used to give the user rights
// they could not grant themselves (issue 21). Each is now refused at
// admission, naming why, or harmless: SubjectAccessReviews show no gain, and
// the admin's revocations take effect.

// sequenceUser is a delegated user with patch too (merge patches and
// server-side apply), admin of a namespace of their own.
func sequenceUser(t *testing.T, prefix string) (name, own string, as client.Client) {
	t.Helper()
	name, as = delegate(t, prefix)
	patch := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "oria-delegate-patch-" + name},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{oriav1alpha1.GroupVersion.Group},
			Resources: []string{"scopetemplates", "scopeinstances", "rbacpolicies"},
			Verbs:     []string{"patch", "get"},
		}},
	}
	own = createNamespace(t, prefix, nil)
	objs := []client.Object{patch,
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: patch.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: patch.Name},
			Subjects:   []rbacv1.Subject{testutil.User(name)},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-admin", Namespace: own},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
			Subjects:   []rbacv1.Subject{testutil.User(name)},
		}}
	for _, o := range objs {
		testutil.Create(t, k8sClient, o)
	}
	cleanup(t, objs...)
	waitAllowed(t, true, testutil.Access{User: name, Verb: "patch", Group: oriav1alpha1.GroupVersion.Group, Resource: "scopeinstances"},
		testutil.Access{User: name, Verb: "create", Group: rbacv1.GroupName, Resource: "rolebindings", Namespace: own})
	return name, own, as
}

// adminPolicy creates, as admin, a policy granting access on an API to
// user in namespaces, (waitPolicyReady waits for it).
func adminPolicy(t *testing.T, group, plural, ext string, access oriav1alpha1.Access, user string, namespaces ...string) *oriav1alpha1.RBACPolicy {
	t.Helper()
	p := &oriav1alpha1.RBACPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("seq")},
		Spec: oriav1alpha1.RBACPolicySpec{
			ExtensionName: ext, Access: access, Namespaces: namespaces,
			Subjects: []rbacv1.Subject{testutil.User(user)},
			APIs:     []oriav1alpha1.APIRef{{Group: group, Resource: plural}},
		},
	}
	require.NoError(t, k8sClient.Create(context.Background(), p))
	cleanup(t, p)
	return p
}

// viewPolicyInBoth has the admin grant user view on a new extension's API
// in own and victim with an RBACPolicy, waits until the grant holds, and
// returns the policy and the access check "user lists the API in ns".
func viewPolicyInBoth(t *testing.T, user, own, victim string) (*oriav1alpha1.RBACPolicy, func(ns string) testutil.Access) {
	t.Helper()
	crd := extensionWithAPI(t, oriav1alpha1.RBACModeFineGrained)
	group, plural, ext := crd.Spec.Group, crd.Spec.Names.Plural, crd.Labels[oriav1alpha1.LabelOLMOwnerName]
	p := adminPolicy(t, group, plural, ext, oriav1alpha1.AccessView, user, own, victim)
	waitPolicyReady(t, p.Name)
	list := func(ns string) testutil.Access {
		return testutil.Access{User: user, Verb: "list", Group: group, Resource: plural, Namespace: ns}
	}
	eventuallyAccess(t, true, list(own), list(victim))
	return p, list
}

// basicUserTemplate creates, as the user, a template binding the harmless
// system:basic-user to themselves.
func basicUserTemplate(t *testing.T, as client.Client, name, user string) *oriav1alpha1.ScopeTemplate {
	t.Helper()
	tmpl := testutil.ScopeTemplate(name, []oriav1alpha1.ClusterRoleTemplate{{Name: "system:basic-user"}}, testutil.User(user))
	require.NoError(t, as.Create(context.Background(), tmpl), "everyone holds basic-user's permissions")
	cleanup(t, tmpl)
	return tmpl
}

func forgeOwner(name string, uid types.UID) []byte {
	return fmt.Appendf(nil, `{"metadata":{"ownerReferences":[{"apiVersion":"%s","kind":"RBACPolicy","name":%q,"uid":%q,"controller":true}]}}`,
		oriav1alpha1.GroupVersion.String(), name, uid)
}

// TestGuardSequenceForgedOwnership (case 1): the user creates the compiled
// objects' names before the admin's policy exists, then claims them for the
// policy with a controller reference.
func TestGuardSequenceForgedOwnership(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	user, own, as := sequenceUser(t, "forger")
	crd := extensionWithAPI(t, oriav1alpha1.RBACModeFineGrained)
	group, plural, ext := crd.Spec.Group, crd.Spec.Names.Plural, crd.Labels[oriav1alpha1.LabelOLMOwnerName]
	policyName := testutil.UniqueName("seq")
	name := policymodel.ObjectName(policyName)
	basicUserTemplate(t, as, name, user)
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: name, NamespaceSelector: &metav1.LabelSelector{}}}
	require.NoError(t, as.Create(ctx, si))
	cleanup(t, si)

	p := &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: policyName}, Spec: oriav1alpha1.RBACPolicySpec{
		ExtensionName: ext, Access: oriav1alpha1.AccessAdmin, Namespaces: []string{own},
		Subjects: []rbacv1.Subject{testutil.User(user)}, APIs: []oriav1alpha1.APIRef{{Group: group, Resource: plural}}}}
	require.NoError(t, k8sClient.Create(ctx, p))
	cleanup(t, p)
	testutil.EventuallyCondition(t, k8sClient, p, testutil.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionFalse, Reason: oriav1alpha1.ReasonConflict})

	for _, obj := range []client.Object{&oriav1alpha1.ScopeTemplate{ObjectMeta: metav1.ObjectMeta{Name: name}}, si} {
		err := as.Patch(ctx, obj, client.RawPatch(types.MergePatchType, forgeOwner(p.Name, p.UID)))
		refused(t, err, `is compiled from RBACPolicy "`+p.Name+`"`, "change the RBACPolicy instead")
	}
	// The policy stays in conflict; the user has no access to the API
	// anywhere, not even in their own namespace.
	testutil.EventuallyCondition(t, k8sClient, p, testutil.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionFalse, Reason: oriav1alpha1.ReasonConflict})
	other := createNamespace(t, "victim", nil)
	eventuallyAccess(t, false,
		testutil.Access{User: user, Verb: "delete", Group: group, Resource: plural, Namespace: other},
		testutil.Access{User: user, Verb: "delete", Group: group, Resource: plural, Namespace: own})
}

// TestGuardSequenceCompiledObjects (cases 2 and 3): the user retargets the
// compiled instance of an admin's policy, or co-owns its namespaces with
// server-side apply; both are refused, and the admin's revocation takes
// effect.
func TestGuardSequenceCompiledObjects(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	user, own, as := sequenceUser(t, "retarget")
	victim := createNamespace(t, "victim", nil)
	p, list := viewPolicyInBoth(t, user, own, victim)
	tmpl := basicUserTemplate(t, as, testutil.UniqueName("harmless"), user)
	name := policymodel.ObjectName(p.Name)

	// Case 2: point the compiled instance at a harmless template, with a
	// selector of every namespace (instead of its list: the two are
	// exclusive).
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: name}}
	err := as.Patch(ctx, si, client.RawPatch(types.MergePatchType,
		fmt.Appendf(nil, `{"spec":{"scopeTemplateName":%q,"namespaces":null,"namespaceSelector":{}}}`, tmpl.Name)))
	refused(t, err, `may not write ScopeInstance "`+name+`": it is compiled from RBACPolicy "`+p.Name+`"`)

	// Case 3: co-own the namespaces with server-side apply, spec unchanged.
	ac := oriaac.ScopeInstance(name).WithSpec(oriaac.ScopeInstanceSpec().
		WithScopeTemplateName(name).WithNamespaces(own, victim))
	refused(t, as.Apply(ctx, ac, client.FieldOwner("mallory"), client.ForceOwnership), "change the RBACPolicy instead")

	// Nor may the user claim a label or a finalizer on it.
	refused(t, as.Patch(ctx, si, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":["example.com/keep"]}}`))),
		"change the RBACPolicy instead")

	// The admin revokes victim: it goes within seconds.
	start := time.Now()
	testutil.Update(t, k8sClient, p, func() { p.Spec.Namespaces = []string{own} })
	eventuallyAccess(t, false, list(victim), list(""))
	t.Logf("revocation took effect after %s", time.Since(start).Round(time.Millisecond))
	eventuallyAccess(t, true, list(own))
}

// TestGuardSequenceCoOwnedInstance (case 4): on an admin's own instance,
// managed with server-side apply (a GitOps tool), the user co-owns the
// namespaces; the admin's apply without victim removes it (namespaces is
// atomic), and an apply that does not force ownership fails loudly instead
// of keeping it.
func TestGuardSequenceCoOwnedInstance(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	user, own, as := sequenceUser(t, "coowner")
	victim := createNamespace(t, "victim", nil)
	name := testutil.UniqueName("gitops")
	tmpl := testutil.ScopeTemplate(name, []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User(user))
	require.NoError(t, k8sClient.Create(ctx, tmpl))
	cleanup(t, tmpl)
	apply := func(c client.Client, manager string, force bool, namespaces ...string) error {
		ac := oriaac.ScopeInstance(name).WithSpec(oriaac.ScopeInstanceSpec().WithScopeTemplateName(name).WithNamespaces(namespaces...))
		opts := []client.ApplyOption{client.FieldOwner(manager)}
		if force {
			opts = append(opts, client.ForceOwnership)
		}
		return c.Apply(ctx, ac, opts...)
	}
	require.NoError(t, apply(k8sClient, "gitops", true, own, victim))
	cleanup(t, &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: name}})
	view := func(ns string) testutil.Access {
		return testutil.Access{User: user, Verb: "list", Resource: "configmaps", Namespace: ns}
	}
	eventuallyAccess(t, true, view(victim))

	// The user re-applies the same namespaces under a manager of their own:
	// checked as writing them (they hold view in both through the grant,
	// so it is admitted), and now co-owns the list.
	require.NoError(t, apply(as, "mallory", false, own, victim))
	// The admin's tool removes victim. Without forcing, the apply
	// conflicts with the co-owner: loud, never a silent keep.
	err := apply(k8sClient, "gitops", false, own)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "conflict")
	t.Log(err)
	start := time.Now()
	require.NoError(t, apply(k8sClient, "gitops", true, own))
	eventuallyAccess(t, false, view(victim))
	t.Logf("revocation took effect after %s", time.Since(start).Round(time.Millisecond))
	got := &oriav1alpha1.ScopeInstance{}
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKey{Name: name}, got))
	assert.Equal(t, []string{own}, got.Spec.Namespaces)
}

// TestGuardSequenceTemplateBeforeBinding (case 5): an admin's template, not
// bound yet, binds admin to an operator's ServiceAccount; the user adds
// themselves to its subjects before the admin binds it. Refused: a new
// subject is checked cluster-wide.
func TestGuardSequenceTemplateBeforeBinding(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	user, own, as := sequenceUser(t, "subjects")
	name := testutil.UniqueName("operator")
	operator := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "operator", Namespace: own}
	tmpl := testutil.ScopeTemplate(name, []oriav1alpha1.ClusterRoleTemplate{{Name: "admin"}}, operator)
	require.NoError(t, k8sClient.Create(ctx, tmpl))
	cleanup(t, tmpl)

	refused(t, userUpdate(t, as, tmpl, func() {
		tmpl.Spec.BindingTemplate.Subjects = append(tmpl.Spec.BindingTemplate.Subjects, testutil.User(user))
	}), `may not bind ClusterRole "admin" cluster-wide`, "checked cluster-wide")
	// Adding a role is refused too; removing a subject is not checked so.
	refused(t, userUpdate(t, as, tmpl, func() {
		tmpl.Spec.ClusterRoles = append(tmpl.Spec.ClusterRoles, oriav1alpha1.ClusterRoleTemplate{Name: "cluster-admin"})
	}), `may not bind ClusterRole "cluster-admin" cluster-wide`)

	// The admin binds it in a namespace the user does not administer: the
	// user gains nothing.
	victim := createNamespace(t, "victim", nil)
	si := scopeInstance(name, name, victim)
	require.NoError(t, k8sClient.Create(ctx, si))
	cleanup(t, si)
	waitScopeInstanceReady(t, si.Name)
	eventuallyAccess(t, false, testutil.Access{User: user, Verb: "get", Resource: "secrets", Namespace: victim})
	eventuallyAccess(t, true, testutil.Access{User: "system:serviceaccount:" + own + ":operator", Verb: "get", Resource: "secrets", Namespace: victim})
}
