package rbacpolicy_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestInvalidSpecKeepsOnlyWhatItStillAllows (issue 29, case 1): a policy
// whose spec turns invalid (someone adds a ServiceAccount without a
// namespace) keeps its grant, but only what its current spec still allows:
// the admin's narrowing of the namespaces and of the subjects lands at once,
// nothing the spec adds is granted until it is valid, and a selector that no
// longer parses revokes.
func TestInvalidSpecKeepsOnlyWhatItStillAllows(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ext, group := installed(t, oriav1alpha1.RBACModeFineGrained, "invalid", "boxes")
	d := testutil.User(testutil.UniqueName("d"))
	p := newPolicy(t, ext.Name, oriav1alpha1.AccessView, func(s *oriav1alpha1.RBACPolicySpec) {
		s.Subjects = append(s.Subjects, d)
		s.Namespaces = []string{"victim", "d-ns"}
	})
	eventuallyTemplateRoles(t, p.Name, "boxes."+group+"-view", "boxes."+group+"-view-crdview")
	before := getTemplate(t, p.Name)
	_, si := compiled(p.Name)
	si = testutil.EventuallyGet(t, k8sClient, si)
	require.Equal(t, []string{"d-ns", "victim"}, si.Spec.Namespaces)

	update := func(mutate func(*oriav1alpha1.RBACPolicySpec)) {
		testutil.Update(t, k8sClient, p, func() { mutate(&p.Spec) })
	}
	compiledNow := func(c *assert.CollectT) (*oriav1alpha1.ScopeTemplate, *oriav1alpha1.ScopeInstance) {
		st, si := compiled(p.Name)
		require.NoError(c, k8sClient.Get(ctx, client.ObjectKeyFromObject(st), st))
		require.NoError(c, k8sClient.Get(ctx, client.ObjectKeyFromObject(si), si))
		return st, si
	}

	// D adds a ServiceAccount without a namespace: the spec is invalid, the
	// grant in force stays as it is.
	update(func(s *oriav1alpha1.RBACPolicySpec) {
		s.Subjects = append(s.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "bot"})
	})
	got := waitReady(t, p.Name, oriav1alpha1.ReasonInvalidSubject)
	assert.Contains(t, readyMessage(got), `ServiceAccount "bot" needs a namespace`)
	assert.Equal(t, before.Spec, getTemplate(t, p.Name).Spec, "an invalid edit alone changes nothing")

	// The admin narrows the namespaces: it lands although the spec is
	// still invalid.
	update(func(s *oriav1alpha1.RBACPolicySpec) { s.Namespaces = []string{"d-ns"} })
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, si := compiledNow(c)
		assert.Equal(c, []string{"d-ns"}, si.Spec.Namespaces)
	}, testutil.Timeout, testutil.Interval)
	waitMessage(t, p.Name, oriav1alpha1.ReasonInvalidSubject, "within what the current spec still allows")
	testutil.EventuallyEvents(t, k8sClient, "RBACPolicy", p.Name, "Narrowed")

	// ... and removes D: gone from the template too.
	update(func(s *oriav1alpha1.RBACPolicySpec) {
		s.Subjects = slices.DeleteFunc(s.Subjects, func(x rbacv1.Subject) bool { return x.Name == d.Name })
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st, _ := compiledNow(c)
		assert.Equal(c, []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "developers"}}, st.Spec.BindingTemplate.Subjects)
	}, testutil.Timeout, testutil.Interval)

	// What an invalid spec adds is not granted: neither victim nor D come
	// back while it stays invalid.
	update(func(s *oriav1alpha1.RBACPolicySpec) {
		s.Subjects = append(s.Subjects, d)
		s.Namespaces = []string{"d-ns", "victim"}
	})
	waitReady(t, p.Name, oriav1alpha1.ReasonInvalidSubject)
	require.Never(t, func() bool {
		st, si := compiled(p.Name)
		if k8sClient.Get(ctx, client.ObjectKeyFromObject(st), st) != nil || k8sClient.Get(ctx, client.ObjectKeyFromObject(si), si) != nil {
			return false
		}
		return slices.Contains(si.Spec.Namespaces, "victim") || slices.Contains(st.Spec.BindingTemplate.Subjects, d)
	}, 2*time.Second, 100*time.Millisecond, "an invalid spec widened the grant")

	// A selector that does not parse: nothing of the list can be shown to
	// match it, so the grant goes.
	update(func(s *oriav1alpha1.RBACPolicySpec) {
		s.Namespaces = nil
		s.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Bogus"}}}
	})
	compiledGone(t, p.Name)
	waitMessage(t, p.Name, oriav1alpha1.ReasonInvalidSubject, "nothing is granted until the spec is valid")

	// Fixed: compiled again from the valid spec.
	update(func(s *oriav1alpha1.RBACPolicySpec) {
		s.NamespaceSelector = nil
		s.Subjects = s.Subjects[:1]
	})
	waitReady(t, p.Name, oriav1alpha1.ReasonProgressing)
	getTemplate(t, p.Name)
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
