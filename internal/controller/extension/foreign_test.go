package extension_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller/extension"
	"github.com/operator-framework/oria/internal/genroles"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestForeignRoleIsNeverAggregated (issue 29, case 5, Legacy mode): a role
// made by hand under a generated name while the extension is Unmanaged, with
// secrets read, is reported (Conflict) and never given an aggregation label
// when the admin switches to Legacy; nobody holding the built-in view role
// reads secrets through it. A hand-made role that copies oria's labels is
// aggregated only once oria has rewritten it to exactly the generated rules.
func TestForeignRoleIsNeverAggregated(t *testing.T) {
	testutil.NeedCluster(t)
	startAggregation(t)
	startManager(t, extension.Options{DefaultMode: unmanaged, ConflictRecheckInterval: 200 * time.Millisecond})
	g := group()
	crd := "things." + g
	ce := installed(t, unmanaged, crd)
	viewName, editName := names.ExtensionRole(crd, names.RoleView), names.ExtensionRole(crd, names.RoleEdit)
	foreign := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: viewName},
		Rules:      append(genroles.Rules(crd, names.RoleView), broadRule),
	}
	testutil.Create(t, k8sClient, foreign)
	// Copies oria's labels and annotation (no controller reference), with
	// secrets too.
	forged := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: editName, Labels: map[string]string{
			oriav1alpha1.LabelManaged: oriav1alpha1.ManagedValue, oriav1alpha1.LabelExtension: names.LabelValue(ce.Name),
		}, Annotations: map[string]string{oriav1alpha1.AnnotationCRD: crd}},
		Rules: append(genroles.Rules(crd, names.RoleEdit), broadRule),
	}
	testutil.Create(t, k8sClient, forged)
	foreign = getRole(t, viewName)

	setMode(t, ce.Name, legacy)
	waitCondition(t, ce.Name, metav1.ConditionFalse, oriav1alpha1.ReasonConflict, `ClusterRole "`+viewName+`" exists and was not created by oria`)
	waitRoles(t, ce, legacy, []string{crd}, viewName)
	// The forged role was rewritten to what oria generates before it
	// carries the aggregation label (one write).
	got := getRole(t, editName)
	assert.Equal(t, genroles.Rules(crd, names.RoleEdit), got.Rules)
	assert.Equal(t, "true", got.Labels[oriav1alpha1.LabelAggregateToEdit])

	ns := testutil.CreateNamespace(t, k8sClient, "foreign", nil)
	viewer, editor := testutil.UniqueName("viewer"), testutil.UniqueName("editor")
	grantBuiltin(t, ns, viewer, "view")
	grantBuiltin(t, ns, editor, "edit")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		// Aggregation has caught up: edit holds the generated edit rules.
		assert.True(c, allowed(c, testutil.Access{User: editor, Verb: "create", Group: g, Resource: "things", Namespace: ns}))
	}, 2*testutil.Timeout, testutil.Interval)
	require.Never(t, func() bool {
		cr := getRole(t, viewName)
		_, labelled := cr.Labels[oriav1alpha1.LabelAggregateToView]
		return labelled || cr.ResourceVersion != foreign.ResourceVersion ||
			slices.ContainsFunc(getRole(t, "view").Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "secrets") })
	}, 2*time.Second, 100*time.Millisecond, "the foreign role was aggregated or modified")
	for _, a := range []testutil.Access{
		{User: viewer, Verb: "get", Resource: "secrets", Namespace: ns, Name: "any"},
		{User: viewer, Verb: "list", Group: g, Resource: "things", Namespace: ns},
	} {
		assert.False(t, allowed(t, a), "%s is allowed", a)
	}
}
