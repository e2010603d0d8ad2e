package binding

import (
	"cmp"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/subjects"
)

// Namespace is what the binding layer needs to know about a namespace.
type Namespace struct {
	Name   string
	Labels map[string]string
	// Terminating is true once the namespace has a deletionTimestamp: no
	// object can be created in it any more, and the namespace controller
	// deletes what is in it.
	Terminating bool
	// UID identifies the namespace: one deleted and created again under
	// the same name has another (see PinNamespaces).
	UID string
}

// Targets is where an instance binds its template.
type Targets struct {
	// Cluster is true when the instance has neither namespaces nor a
	// namespaceSelector: the roles are bound with ClusterRoleBindings.
	Cluster bool
	// Namespaces are the existing, non-terminating target namespaces,
	// sorted: the listed namespaces or those the selector matches (the
	// schema makes the two exclusive; an object stored before that rule,
	// with both, gets the union).
	Namespaces []string
	// Terminating are target namespaces that are being deleted, sorted. oria
	// creates nothing in them and leaves their bindings to the namespace
	// controller (an operator finishing finalizers there keeps its access).
	Terminating []string
	// Missing are listed namespaces that do not exist, sorted.
	Missing []string
	// Recreated are listed namespaces deleted and created again since the
	// spec was written (see PinNamespaces), sorted: not bound.
	Recreated []string
}

// Selector parses an instance's namespaceSelector; nil when it has none. An
// unparseable selector is a SpecError with reason InvalidSelector.
func Selector(spec oriav1alpha1.ScopeInstanceSpec) (labels.Selector, *SpecError) {
	if spec.NamespaceSelector == nil {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(spec.NamespaceSelector)
	if err != nil {
		return nil, specErrorf(oriav1alpha1.ReasonInvalidSelector, "spec.namespaceSelector: %v", err)
	}
	return sel, nil
}

// IsClusterWide reports whether spec binds cluster-wide: neither namespaces
// nor a namespaceSelector. (A selector matching no namespace binds nothing;
// it never widens to cluster-wide.)
func IsClusterWide(spec oriav1alpha1.ScopeInstanceSpec) bool {
	return len(spec.Namespaces) == 0 && spec.NamespaceSelector == nil
}

// ResolveTargets returns the targets of an instance given every namespace of
// the cluster.
func ResolveTargets(spec oriav1alpha1.ScopeInstanceSpec, namespaces []Namespace) (Targets, *SpecError) {
	if IsClusterWide(spec) {
		return Targets{Cluster: true}, nil
	}
	sel, serr := Selector(spec)
	if serr != nil {
		return Targets{}, serr
	}
	listed := make(map[string]bool, len(spec.Namespaces))
	for _, n := range spec.Namespaces {
		listed[n] = true
	}
	var t Targets
	for _, ns := range namespaces {
		if !listed[ns.Name] && (sel == nil || !sel.Matches(labels.Set(ns.Labels))) {
			continue
		}
		delete(listed, ns.Name)
		if ns.Terminating {
			t.Terminating = append(t.Terminating, ns.Name)
		} else {
			t.Namespaces = append(t.Namespaces, ns.Name)
		}
	}
	for n := range listed {
		t.Missing = append(t.Missing, n)
	}
	slices.Sort(t.Namespaces)
	slices.Sort(t.Terminating)
	slices.Sort(t.Missing)
	return t, nil
}

// ValidateClusterSubjects returns a SpecError (InvalidSubject) when a
// subject cannot be bound cluster-wide: a ServiceAccount without a
// namespace means "in each target namespace", which a ClusterRoleBinding
// cannot express.
func ValidateClusterSubjects(subj []rbacv1.Subject) *SpecError {
	problems := subjects.RequireNamespaces(subj, "subjects",
		"has no namespace, so it can only be bound in namespaces (set spec.namespaces or spec.namespaceSelector on the instance, or a namespace on the subject)")
	if len(problems) > 0 {
		return &SpecError{Reason: oriav1alpha1.ReasonInvalidSubject, Message: strings.Join(problems, "; ")}
	}
	return nil
}

// roleRef is the roleRef of every binding oria writes.
func roleRef(role string) rbacv1.RoleRef {
	return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
}

// RoleBindings returns one RoleBinding per role in each namespace, sorted by
// namespace then name.
func RoleBindings(inst *oriav1alpha1.ScopeInstance, template string, roles []string, subj []rbacv1.Subject, namespaces []string) []*rbacv1.RoleBinding {
	// One labels map and one owner slice for every binding: read-only, and
	// a 5,000-namespace fan-out would otherwise allocate 5,000 of each.
	owners := []metav1.OwnerReference{ownership.Ref(ownership.KindScopeInstance, inst.Name, inst.UID)}
	lbls := ownership.InstanceLabels(inst.Name, template)
	// Binding names are the same in every namespace, and so are the
	// subjects unless a ServiceAccount takes the namespace of its binding.
	bindingNames := make([]string, len(roles))
	for i, role := range roles {
		bindingNames[i] = BindingName(inst.Name, role)
	}
	shared := subjects.Normalize(subj, "")
	perNamespace := subjects.DependOnNamespace(subj)
	out := make([]*rbacv1.RoleBinding, 0, len(roles)*len(namespaces))
	for _, ns := range namespaces {
		nsSubj := shared
		if perNamespace {
			nsSubj = subjects.Normalize(subj, ns)
		}
		for i, role := range roles {
			out = append(out, &rbacv1.RoleBinding{
				TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
				ObjectMeta: metav1.ObjectMeta{
					Name:            bindingNames[i],
					Namespace:       ns,
					Labels:          lbls,
					OwnerReferences: owners,
				},
				RoleRef:  roleRef(role),
				Subjects: nsSubj,
			})
		}
	}
	slices.SortFunc(out, func(a, b *rbacv1.RoleBinding) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// ClusterRoleBindings returns one ClusterRoleBinding per role, sorted by
// name. Subjects must have passed ValidateClusterSubjects.
func ClusterRoleBindings(inst *oriav1alpha1.ScopeInstance, template string, roles []string, subj []rbacv1.Subject) []*rbacv1.ClusterRoleBinding {
	owner := ownership.Ref(ownership.KindScopeInstance, inst.Name, inst.UID)
	lbls := ownership.InstanceLabels(inst.Name, template)
	subj = subjects.Normalize(subj, "")
	out := make([]*rbacv1.ClusterRoleBinding, 0, len(roles))
	for _, role := range roles {
		out = append(out, &rbacv1.ClusterRoleBinding{
			TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{
				Name:            BindingName(inst.Name, role),
				Labels:          lbls,
				OwnerReferences: []metav1.OwnerReference{owner},
			},
			RoleRef:  roleRef(role),
			Subjects: subj,
		})
	}
	sortByName(out)
	return out
}

func sortByName[T metav1.Object](objs []T) {
	slices.SortFunc(objs, func(a, b T) int { return cmp.Compare(a.GetName(), b.GetName()) })
}

// Keep returns the keys of an instance's bindings that must not be deleted:
// the intended ones (want), and the bindings of pending roles (inline roles
// not created yet) where the instance binds. Bindings in terminating target
// namespaces are kept as well (see Stale).
func Keep(instance string, want []client.Object, t Targets, pending []string) map[types.NamespacedName]bool {
	keep := make(map[types.NamespacedName]bool, len(want))
	for _, o := range want {
		keep[key(o)] = true
	}
	for _, role := range pending {
		name := BindingName(instance, role)
		if t.Cluster {
			keep[types.NamespacedName{Name: name}] = true
		}
		for _, ns := range t.Namespaces {
			keep[types.NamespacedName{Namespace: ns, Name: name}] = true
		}
	}
	return keep
}

// Stale returns the existing bindings to delete: those not in keep, except
// in terminating target namespaces, whose bindings are left to the namespace
// controller.
func Stale[T client.Object](existing []T, keep map[types.NamespacedName]bool, t Targets) []T {
	var out []T
	for _, o := range existing {
		if !keep[key(o)] && !slices.Contains(t.Terminating, o.GetNamespace()) {
			out = append(out, o)
		}
	}
	return out
}

func key(o client.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
}
