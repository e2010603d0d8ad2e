package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// forEveryone is how a refusal of a spec error ends: admins are refused too.
const forEveryone = "so it is refused for every user, cluster admins included"

// TestGuardSpecErrorInTemplate (issue 29, case 1): the delegated user D
// adds an inline role with `verbs: []` to an admin's template, which the
// admin's instance binds in [victim, D's namespace]. Admitted, it would turn
// the template TemplateInvalid and freeze the admin's instance against
// their narrowing. It is refused at admission, naming the field, and so is
// the same write by the admin; the template stays valid and the admin's
// narrowing takes effect within seconds.
func TestGuardSpecErrorInTemplate(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	user, own, as := sequenceUser(t, "specerr")
	victim := createNamespace(t, "victim", nil)
	view := func(ns string) testutil.Access {
		return testutil.Access{User: user, Verb: "list", Resource: "configmaps", Namespace: ns}
	}
	name := testutil.UniqueName("admins")
	tmpl := testutil.ScopeTemplate(name, []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User(user))
	require.NoError(t, k8sClient.Create(ctx, tmpl))
	si := scopeInstance(name, name, victim, own)
	require.NoError(t, k8sClient.Create(ctx, si))
	cleanup(t, tmpl, si)
	waitScopeInstanceReady(t, si.Name)
	eventuallyAccess(t, true, view(victim), view(own))

	broken := oriav1alpha1.ClusterRoleTemplate{Name: testutil.UniqueName("nothing"),
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{}}}}
	addBroken := func() { tmpl.Spec.ClusterRoles = append(tmpl.Spec.ClusterRoles, broken) }
	const field = `spec.clusterRoles[1].rules[0]: verbs must contain at least one value`
	refused(t, userUpdate(t, as, tmpl, addBroken), `ScopeTemplate "`+name+`" is not valid (InvalidSpec)`, field, forEveryone)
	refused(t, userUpdate(t, k8sClient, tmpl, addBroken), field, forEveryone)
	got := &oriav1alpha1.ScopeTemplate{}
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKey{Name: name}, got))
	assert.Len(t, got.Spec.ClusterRoles, 1, "nothing of the refused writes is stored")
	testutil.EventuallyCondition(t, k8sClient, got,
		testutil.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionTrue, Reason: oriav1alpha1.ReasonValid})

	// The admin narrows their instance to D's namespace: victim goes.
	start := time.Now()
	update(t, si, func() { si.Spec.Namespaces = []string{own} })
	eventuallyAccess(t, false, view(victim))
	t.Logf("revocation took effect after %s", time.Since(start).Round(time.Millisecond))
	eventuallyAccess(t, true, view(own))
}

// TestGuardSpecErrorInPolicy (issue 29, case 1): D adds a ServiceAccount
// subject without a namespace to an admin's RBACPolicy that already grants
// D view in [victim, D's namespace]. Admitted, it would turn the policy
// InvalidSubject and keep the admin's later narrowing from reaching the
// compiled instance. It is refused at admission, naming the field, for the
// admin too; the admin's narrowing takes effect within seconds.
func TestGuardSpecErrorInPolicy(t *testing.T) {
	testutil.NeedCluster(t)
	user, own, as := sequenceUser(t, "specerr")
	victim := createNamespace(t, "victim", nil)
	p, list := viewPolicyInBoth(t, user, own, victim)

	addBot := func() {
		p.Spec.Subjects = append(p.Spec.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "bot"})
	}
	const field = `spec.subjects[1]: ServiceAccount "bot" needs a namespace`
	refused(t, userUpdate(t, as, p, addBot), `RBACPolicy "`+p.Name+`" is not valid (InvalidSubject)`, field, forEveryone)
	refused(t, userUpdate(t, k8sClient, p, addBot), field, forEveryone)
	testutil.EventuallyCondition(t, k8sClient, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: p.Name}},
		testutil.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionTrue})

	start := time.Now()
	update(t, p, func() { p.Spec.Namespaces = []string{own} })
	eventuallyAccess(t, false, list(victim))
	t.Logf("revocation took effect after %s", time.Since(start).Round(time.Millisecond))
	eventuallyAccess(t, true, list(own))
}
