package rbacpolicy

import (
	"encoding/json"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	oriaac "github.com/operator-framework/oria/api/applyconfiguration/api/v1alpha1"
	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
)

// rolesFor lists the generated role kinds an access level binds, per API.
// The generated -edit role has only write verbs and -admin has no CRD read,
// so every level also binds what it needs to read: view and crdview for edit,
// crdview for admin. The order is the order of the template's clusterRoles.
var rolesFor = map[oriav1alpha1.Access][]string{
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
	Template *oriaac.ScopeTemplateApplyConfiguration
	Instance *oriaac.ScopeInstanceApplyConfiguration
}

// ObjectName is the name of the ScopeTemplate and of the ScopeInstance a
// policy compiles into: "rbacpolicy-<policy name>", shortened when needed.
func ObjectName(policy string) string {
	return names.Join("rbacpolicy", policy)
}

// PolicyLabels are the labels of the objects compiled from the policy.
func PolicyLabels(policy string) map[string]string {
	return map[string]string{
		oriav1alpha1.LabelManagedBy:  oriav1alpha1.ManagedByValue,
		oriav1alpha1.LabelRBACPolicy: names.LabelValue(policy),
	}
}

// Compile turns a policy and the names of its extension's CRDs into the
// ScopeTemplate and ScopeInstance that implement it. It is pure: the same
// inputs always give the same output.
func Compile(policy *oriav1alpha1.RBACPolicy, crdNames []string) Compiled {
	var c Compiled
	c.APIs, c.Missing = coveredAPIs(policy.Spec.APIs, crdNames)
	if len(c.APIs) == 0 {
		return c
	}
	name := ObjectName(policy.Name)
	owner := metav1ac.OwnerReference().
		WithAPIVersion(oriav1alpha1.GroupVersion.String()).
		WithKind("RBACPolicy").
		WithName(policy.Name).
		WithUID(policy.UID).
		WithController(true)

	roles := make([]*oriaac.ClusterRoleTemplateApplyConfiguration, 0, len(c.APIs)*3)
	for _, crd := range c.APIs {
		for _, kind := range rolesFor[policy.Spec.Access] {
			role := names.ExtensionRole(crd, kind)
			c.Roles = append(c.Roles, role)
			roles = append(roles, oriaac.ClusterRoleTemplate().WithName(role))
		}
	}
	c.Template = oriaac.ScopeTemplate(name).
		WithLabels(PolicyLabels(policy.Name)).
		WithOwnerReferences(owner).
		WithSpec(oriaac.ScopeTemplateSpec().
			WithClusterRoles(roles...).
			WithBindingTemplate(oriaac.BindingTemplate().WithSubjects(NormalizeSubjects(policy.Spec.Subjects)...)))

	spec := oriaac.ScopeInstanceSpec().WithScopeTemplateName(name)
	if len(policy.Spec.Namespaces) > 0 {
		ns := slices.Clone(policy.Spec.Namespaces)
		slices.Sort(ns)
		spec.WithNamespaces(slices.Compact(ns)...)
	}
	if policy.Spec.NamespaceSelector != nil {
		spec.WithNamespaceSelector(labelSelector(policy.Spec.NamespaceSelector))
	}
	c.Instance = oriaac.ScopeInstance(name).
		WithLabels(PolicyLabels(policy.Name)).
		WithOwnerReferences(owner).
		WithSpec(spec)
	return c
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
			n := r.Resource + "." + r.Group
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

// NormalizeSubjects fills in the API group RBAC expects for User and Group
// subjects (users commonly omit it) and returns the subjects in spec order.
func NormalizeSubjects(in []rbacv1.Subject) []rbacv1.Subject {
	out := make([]rbacv1.Subject, len(in))
	for i, s := range in {
		if (s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind) && s.APIGroup == "" {
			s.APIGroup = rbacv1.GroupName
		}
		out[i] = s
	}
	return out
}

// ValidateSubjects returns a message for each unusable subject: an unknown
// kind, an empty name, a ServiceAccount without namespace, or a wrong API
// group. The API server would reject such bindings; reporting them on the
// policy says which subject to fix.
func ValidateSubjects(subjects []rbacv1.Subject) []string {
	var problems []string
	for i, s := range subjects {
		at := fmt.Sprintf("subjects[%d]", i)
		switch {
		case s.Name == "":
			problems = append(problems, at+": name is required")
		case s.Kind == rbacv1.ServiceAccountKind:
			if s.Namespace == "" {
				problems = append(problems, fmt.Sprintf("%s: ServiceAccount %q needs a namespace", at, s.Name))
			}
			if s.APIGroup != "" {
				problems = append(problems, fmt.Sprintf("%s: ServiceAccount %q must have an empty apiGroup, not %q", at, s.Name, s.APIGroup))
			}
		case s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind:
			if s.APIGroup != "" && s.APIGroup != rbacv1.GroupName {
				problems = append(problems, fmt.Sprintf("%s: %s %q must have apiGroup %s, not %q", at, s.Kind, s.Name, rbacv1.GroupName, s.APIGroup))
			}
		default:
			problems = append(problems, fmt.Sprintf("%s: kind %q is not one of User, Group, ServiceAccount", at, s.Kind))
		}
	}
	return problems
}

func labelSelector(s *metav1.LabelSelector) *metav1ac.LabelSelectorApplyConfiguration {
	ac := metav1ac.LabelSelector()
	if len(s.MatchLabels) > 0 {
		ac.WithMatchLabels(s.MatchLabels)
	}
	for _, e := range s.MatchExpressions {
		ac.WithMatchExpressions(metav1ac.LabelSelectorRequirement().
			WithKey(e.Key).WithOperator(e.Operator).WithValues(e.Values...))
	}
	return ac
}

// templateSpec and instanceSpec turn apply configurations into the typed
// specs they describe, to compare with what is on the cluster (a JSON round
// trip: apply configurations serialize exactly as the typed objects do).
func templateSpec(ac *oriaac.ScopeTemplateApplyConfiguration) (oriav1alpha1.ScopeTemplateSpec, error) {
	var s oriav1alpha1.ScopeTemplateSpec
	err := roundTrip(ac.Spec, &s)
	return s, err
}

func instanceSpec(ac *oriaac.ScopeInstanceApplyConfiguration) (oriav1alpha1.ScopeInstanceSpec, error) {
	var s oriav1alpha1.ScopeInstanceSpec
	err := roundTrip(ac.Spec, &s)
	return s, err
}

func roundTrip(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// ownedBy reports whether obj is controlled by the policy with this UID.
func ownedBy(obj metav1.Object, uid types.UID) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == uid && ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}
