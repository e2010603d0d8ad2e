package eligibility

import (
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/ownership"
)

func TestActivation(t *testing.T) {
	r := decided(request(), Approval, "bob", t0.Add(time.Minute), "")
	r.UID = "uid-1"
	p := eligiblePolicy()
	p.Spec.Namespaces = []string{"team-a", "team-b"}
	v := Assess(r, p, t0.Add(2*time.Minute))
	c := Activation(r, p, v, []string{"applications.argoproj.io"})
	if c.Template == nil || c.Instance == nil {
		t.Fatal("nothing compiled")
	}
	want := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}
	if s := c.Template.Spec.BindingTemplate.Subjects; len(s) != 1 || s[0] != want {
		t.Fatalf("subjects %v: the requesting user alone, never the group", s)
	}
	if ns := c.Instance.Spec.Namespaces; len(ns) != 1 || ns[0] != "team-a" {
		t.Fatalf("namespaces %v: the requested ones only", ns)
	}
	if !c.Instance.Spec.NotBefore.Time.Equal(t0.Add(time.Minute)) || !c.Instance.Spec.ExpiresAt.Time.Equal(t0.Add(11*time.Minute)) {
		t.Fatalf("window %v to %v", c.Instance.Spec.NotBefore, c.Instance.Spec.ExpiresAt)
	}
	if c.Instance.Name != "accessrequest-r1" || c.Instance.Spec.ScopeTemplateName != c.Template.Name ||
		!ownership.ControlledByUID(c.Instance, "uid-1") || !ownership.ControlledByUID(c.Template, "uid-1") ||
		c.Template.Labels[oriav1alpha1.LabelAccessRequest] != "r1" || c.Template.Labels[oriav1alpha1.LabelRBACPolicy] != "" {
		t.Fatalf("metadata %+v / %+v", c.Template.ObjectMeta, c.Instance.ObjectMeta)
	}
	if len(c.Template.Spec.ClusterRoles) != 3 {
		t.Fatalf("edit binds edit, view and crdview: %v", c.Template.Spec.ClusterRoles)
	}
}
