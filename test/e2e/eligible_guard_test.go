package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestEligibilityChangeIsAGrant: a delegated user who may write
// RBACPolicies, but may not grant edit on the extension's API, cannot
// loosen an admin's eligible policy: dropping its approvers (so that its
// subjects self-activate), lengthening its maximum, or dropping eligibility
// (so that its subjects hold the access at once) is checked as a grant and
// refused by the guard.
func TestEligibilityChangeIsAGrant(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns := createNamespace(t, "eligible-loosen", nil)
	crd := extensionWithAPI(t, oriav1alpha1.RBACModeFineGrained)
	ext := crd.Labels[oriav1alpha1.LabelOLMOwnerName]
	waitExtensionCondition(t, ext, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
	_, asD := delegate(t, "loosen")
	policy := &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("eligible")}, Spec: oriav1alpha1.RBACPolicySpec{
		ExtensionName: ext, Access: oriav1alpha1.AccessEdit, Namespaces: []string{ns},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: testutil.UniqueName("devs")}},
		Eligibility: &oriav1alpha1.Eligibility{MaxDuration: metav1.Duration{Duration: time.Hour},
			Approvers: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: testutil.UniqueName("leads")}}},
	}}
	require.NoError(t, k8sClient.Create(ctx, policy.DeepCopy()))
	cleanup(t, policy)
	for name, loosen := range map[string]func(p *oriav1alpha1.RBACPolicy){
		"no approvers": func(p *oriav1alpha1.RBACPolicy) { p.Spec.Eligibility.Approvers = nil },
		"a longer maximum": func(p *oriav1alpha1.RBACPolicy) {
			p.Spec.Eligibility.MaxDuration = metav1.Duration{Duration: 24 * time.Hour}
		},
		"no eligibility": func(p *oriav1alpha1.RBACPolicy) { p.Spec.Eligibility = nil },
	} {
		t.Run(name, func(t *testing.T) {
			obj := &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: policy.Name}}
			refused(t, userUpdate(t, asD, obj, func() { loosen(obj) }))
		})
	}
}
