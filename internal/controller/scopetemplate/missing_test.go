package scopetemplate_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestReferencedClusterRoleMissing: a template that references a
// ClusterRole that does not exist (a typo) says so; once the role exists,
// the template is Valid again.
func TestReferencedClusterRoleMissing(t *testing.T) {
	testutil.NeedCluster(t)
	missing := testutil.UniqueName("viewer")
	tmpl := &oriav1alpha1.ScopeTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("tmpl")},
		Spec: oriav1alpha1.ScopeTemplateSpec{
			ClusterRoles:    []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}, {Name: missing}},
			BindingTemplate: oriav1alpha1.BindingTemplate{Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "alice"}}},
		},
	}
	create(t, tmpl)
	got := eventuallyReady(t, tmpl.Name, metav1.ConditionFalse, oriav1alpha1.ReasonClusterRoleNotFound)
	msg := meta.FindStatusCondition(got.Status.Conditions, oriav1alpha1.TypeReady).Message
	assert.Contains(t, msg, `"`+missing+`"`)
	assert.NotContains(t, msg, `"view"`, "view exists")

	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: missing}}
	testutil.Create(t, k8sClient, role)
	eventuallyReady(t, tmpl.Name, metav1.ConditionTrue, oriav1alpha1.ReasonValid)
}
