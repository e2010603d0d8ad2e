// Package policy is the pure model of an RBACPolicy: what a policy compiles
// into (a ScopeTemplate and a ScopeInstance owned by it), under which names
// and labels, and which subjects it may name. The RBACPolicy controller
// writes what Compile returns; the escalation guard checks the requester
// against the same result; nothing here reads the cluster.
package policy

import (
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/subjects"
)

// rolesFor lists the generated role kinds an access level binds, per API.
// The generated -edit role has only write verbs and -admin has no CRD read,
// so every level also binds what it needs to read: view and crdview for edit,
// crdview for admin. The order is the order of the template's clusterRoles.
var rolesFor = map[oriav1alpha1.Access][]names.RoleKind{
	oriav1alpha1.AccessView:  {names.RoleView, names.RoleViewCRDView},
	oriav1alpha1.AccessEdit:  {names.RoleEdit, names.RoleView, names.RoleViewCRDView},
	oriav1alpha1.AccessAdmin: {names.RoleAdmin, names.RoleViewCRDView},
}

// Compiled is what one RBACPolicy compiles into.
type Compiled struct {
	// APIs are the names of the extension's CRDs the policy covers, sorted.
	APIs []string
	// Missing are the APIs the policy names that the extension does not
	// provide, as "<resource>.<group>".
	Missing []string
	// Roles are the ClusterRole names bound, in template order.
	Roles []string
	// Template and Instance are the full intended objects; nil when the
	// policy covers no API (a ScopeTemplate needs at least one role).
	Template *oriav1alpha1.ScopeTemplate
	Instance *oriav1alpha1.ScopeInstance
}

// ObjectName is the name of the ScopeTemplate and of the ScopeInstance a
// policy compiles into: "rbacpolicy-<policy name>", shortened when needed.
func ObjectName(policy string) string {
	return names.Join("rbacpolicy", policy)
}

// CRDName is the name of the CRD that serves an API a policy names:
// "<resource>.<group>".
func CRDName(a oriav1alpha1.APIRef) string { return a.Resource + "." + a.Group }

// PolicyLabels are the labels of the objects compiled from the policy.
func PolicyLabels(policy string) map[string]string { return ownership.PolicyLabels(policy) }

// ValidateSubjects returns a message for each unusable subject of a policy:
// what subjects.Validate rejects, and a ServiceAccount without a namespace
// (a policy names each subject once for all its namespaces).
func ValidateSubjects(subj []rbacv1.Subject) []string {
	return append(subjects.Validate(subj, "spec.subjects"),
		subjects.RequireNamespaces(subj, "spec.subjects", "needs a namespace: an RBACPolicy names each ServiceAccount once for every namespace it targets")...)
}

// Compile turns a policy and the names of its extension's CRDs into the
// ScopeTemplate and ScopeInstance that implement it. It is pure: the same
// inputs always give the same output. The instance carries the policy's
// window (notBefore, expiresAt): whether the window is open now is the
// ScopeInstance controller's to judge, so the compiled objects do not
// change as time passes.
func Compile(policy *oriav1alpha1.RBACPolicy, crdNames []string) Compiled {
	var c Compiled
	c.APIs, c.Missing = coveredAPIs(policy.Spec.APIs, crdNames)
	if len(c.APIs) == 0 {
		return c
	}
	name := ObjectName(policy.Name)
	meta := compiledMeta(policy)

	roles := make([]oriav1alpha1.ClusterRoleTemplate, 0, len(c.APIs)*3)
	for _, crd := range c.APIs {
		for _, kind := range rolesFor[policy.Spec.Access] {
			role := names.ExtensionRole(crd, kind)
			c.Roles = append(c.Roles, role)
			roles = append(roles, oriav1alpha1.ClusterRoleTemplate{Name: role})
		}
	}
	c.Template = &oriav1alpha1.ScopeTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: oriav1alpha1.GroupVersion.String(), Kind: ownership.KindScopeTemplate},
		ObjectMeta: *meta.DeepCopy(),
		Spec: oriav1alpha1.ScopeTemplateSpec{
			ClusterRoles:    roles,
			BindingTemplate: oriav1alpha1.BindingTemplate{Subjects: subjects.Normalize(policy.Spec.Subjects, "")},
		},
	}
	spec := oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: name, ServiceAccount: policy.Spec.ServiceAccount.DeepCopy()}
	if len(policy.Spec.Namespaces) > 0 {
		spec.Namespaces = slices.Compact(slices.Sorted(slices.Values(policy.Spec.Namespaces)))
	}
	if policy.Spec.NamespaceSelector != nil {
		spec.NamespaceSelector = policy.Spec.NamespaceSelector.DeepCopy()
	}
	// The instance carries the policy's window, in whole seconds as the
	// API stores it (never wider).
	window := binding.PolicyWindow(policy.Spec).Whole()
	spec.NotBefore, spec.ExpiresAt = window.NotBefore, window.ExpiresAt
	c.Instance = &oriav1alpha1.ScopeInstance{
		TypeMeta:   metav1.TypeMeta{APIVersion: oriav1alpha1.GroupVersion.String(), Kind: ownership.KindScopeInstance},
		ObjectMeta: *meta.DeepCopy(),
		Spec:       spec,
	}
	return c
}

// compiledMeta is the metadata of the objects compiled from policy: their
// name, the policy's labels and its controller reference.
func compiledMeta(policy *oriav1alpha1.RBACPolicy) metav1.ObjectMeta {
	owner := ownership.Ref(ownership.KindRBACPolicy, policy.Name, policy.UID)
	// No blockOwnerDeletion: it would need update on rbacpolicies/finalizers,
	// and a policy's deletion never waits for its compiled objects.
	owner.BlockOwnerDeletion = nil
	return metav1.ObjectMeta{Name: ObjectName(policy.Name), Labels: ownership.PolicyLabels(policy.Name), OwnerReferences: []metav1.OwnerReference{owner}}
}

// coveredAPIs returns the CRD names among crdNames that refs select (all
// of them when refs is empty), and the refs that match no CRD.
func coveredAPIs(refs []oriav1alpha1.APIRef, crdNames []string) (covered, missing []string) {
	if len(refs) == 0 {
		covered = slices.Clone(crdNames)
	} else {
		have := make(map[string]bool, len(crdNames))
		for _, n := range crdNames {
			have[n] = true
		}
		for _, r := range refs {
			n := CRDName(r)
			if have[n] {
				covered = append(covered, n)
			} else {
				missing = append(missing, n)
			}
		}
	}
	slices.Sort(covered)
	slices.Sort(missing)
	return slices.Compact(covered), slices.Compact(missing)
}

// Withhold removes from c the roles named in withheld (role name → why),
// the roles the policy refuses to bind: missing, changed since oria
// generated them, someone else's, or bundle-provided beyond their extension
// (package rolejudge; the plugin's preview, bundlerole.TooBroad alone), so
// that the compiled template never binds them. When no role
// is left, nothing is compiled (Template and Instance are nil). It returns
// the reasons of the roles it removed, sorted by role name.
func (c *Compiled) Withhold(withheld map[string]string) []string {
	if len(withheld) == 0 || c.Template == nil {
		return nil
	}
	var why []string
	c.Roles = slices.DeleteFunc(c.Roles, func(r string) bool {
		if msg, ok := withheld[r]; ok {
			why = append(why, msg)
			return true
		}
		return false
	})
	c.Template.Spec.ClusterRoles = slices.DeleteFunc(c.Template.Spec.ClusterRoles, func(r oriav1alpha1.ClusterRoleTemplate) bool {
		_, ok := withheld[r.Name]
		return ok
	})
	if len(c.Roles) == 0 {
		c.Template, c.Instance = nil, nil
	}
	slices.Sort(why)
	return why
}
