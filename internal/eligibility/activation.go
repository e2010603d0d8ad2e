package eligibility

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/policy"
)

// ObjectName is the name of the ScopeTemplate and ScopeInstance an
// activation compiles into: "accessrequest-<request>", shortened when
// needed.
func ObjectName(request string) string { return names.Join("accessrequest", request) }

// Activation compiles the grant of active request r (assessment v) of policy
// p, over the CRDs crds, with the policy compiler itself (policy.Compile):
// the policy's access, APIs and ServiceAccount ceiling, for the requesting
// user alone (a User subject, never the group they were eligible through),
// in v's namespaces, from v.Start to v.End. The objects are named after the
// request and controlled by it (UID).
func Activation(r *oriav1alpha1.AccessRequest, p *oriav1alpha1.RBACPolicy, v Assessment, crds []string) policy.Compiled {
	syn := p.DeepCopy()
	syn.Name, syn.UID = r.Name, r.UID
	syn.Spec.Subjects = []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: r.Spec.Requester}}
	syn.Spec.Namespaces, syn.Spec.NamespaceSelector = v.Namespaces, nil
	syn.Spec.NotBefore, syn.Spec.ExpiresAt = v.Start.DeepCopy(), v.End.DeepCopy()
	syn.Spec.Eligibility = nil
	c := policy.Compile(syn, crds)
	if c.Template == nil {
		return c
	}
	owner := ownership.Ref(ownership.KindAccessRequest, r.Name, r.UID)
	owner.BlockOwnerDeletion = nil
	meta := metav1.ObjectMeta{Name: ObjectName(r.Name), Labels: ownership.AccessRequestLabels(r.Name), OwnerReferences: []metav1.OwnerReference{owner}}
	c.Template.ObjectMeta, c.Instance.ObjectMeta = *meta.DeepCopy(), *meta.DeepCopy()
	c.Instance.Spec.ScopeTemplateName = meta.Name
	return c
}
