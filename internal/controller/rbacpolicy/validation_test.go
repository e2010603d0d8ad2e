package rbacpolicy_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

func TestInvalidSubjectAndSelectorKeepGrants(t *testing.T) {
	testutil.NeedCluster(t)
	ext, _ := installed(t, oriav1alpha1.RBACModeFineGrained, "invalid", "boxes")
	p := newPolicy(t, ext.Name, oriav1alpha1.AccessView)
	waitReady(t, p.Name, oriav1alpha1.ReasonProgressing)
	before := getTemplate(t, p.Name)

	update := func(mutate func(*oriav1alpha1.RBACPolicySpec)) {
		testutil.Update(t, k8sClient, p, func() { mutate(&p.Spec) })
	}
	update(func(s *oriav1alpha1.RBACPolicySpec) {
		s.Subjects = append(s.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "bot"})
	})
	got := waitReady(t, p.Name, oriav1alpha1.ReasonInvalidSubject)
	assert.Contains(t, readyMessage(got), `ServiceAccount "bot" needs a namespace`)
	after := getTemplate(t, p.Name)
	assert.Equal(t, before.Spec, after.Spec, "an invalid edit leaves the existing grant alone")

	update(func(s *oriav1alpha1.RBACPolicySpec) {
		s.Subjects = s.Subjects[:1]
		s.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Bogus"}}}
	})
	got = waitReady(t, p.Name, oriav1alpha1.ReasonInvalidSelector)
	assert.Contains(t, readyMessage(got), "Bogus")

	update(func(s *oriav1alpha1.RBACPolicySpec) { s.NamespaceSelector = nil })
	waitReady(t, p.Name, oriav1alpha1.ReasonProgressing)
}

// TestSchemaRejectsBadInput: what the CRD schema can check is refused at
// once by the API server, with a message naming the field.
func TestSchemaRejectsBadInput(t *testing.T) {
	testutil.NeedCluster(t)
	valid := func() *oriav1alpha1.RBACPolicy {
		return &oriav1alpha1.RBACPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("bad")},
			Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: "x", Access: oriav1alpha1.AccessView,
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "alice"}}},
		}
	}
	for _, tc := range []struct {
		name   string
		mutate func(*oriav1alpha1.RBACPolicySpec)
		want   string
	}{
		{"unknown access", func(s *oriav1alpha1.RBACPolicySpec) { s.Access = "owner" }, "spec.access"},
		{"no subjects", func(s *oriav1alpha1.RBACPolicySpec) { s.Subjects = nil }, "spec.subjects"},
		{"empty extension", func(s *oriav1alpha1.RBACPolicySpec) { s.ExtensionName = "" }, "spec.extensionName"},
		{"invalid namespace name", func(s *oriav1alpha1.RBACPolicySpec) { s.Namespaces = []string{"Team_A"} }, "spec.namespaces[0]"},
		{"api without resource", func(s *oriav1alpha1.RBACPolicySpec) { s.APIs = []oriav1alpha1.APIRef{{Group: "argoproj.io"}} }, "spec.apis[0].resource"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := valid()
			tc.mutate(&p.Spec)
			err := k8sClient.Create(context.Background(), p)
			require.Error(t, err)
			assert.True(t, apierrors.IsInvalid(err), "want Invalid, got %v", err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// And the valid base is accepted, so the cases above fail for their
	// own reason.
	p := valid()
	require.NoError(t, k8sClient.Create(context.Background(), p))
	require.NoError(t, k8sClient.Delete(context.Background(), p))
}
