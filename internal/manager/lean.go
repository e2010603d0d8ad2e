package manager

import (
	"slices"
	"strings"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// Bindings dominate oria's memory on a large cluster: a ScopeInstance
// selecting 5,000 namespaces has 5,000 RoleBindings in the cache, and ten
// of them 50,000. Decoded one by one, each carries its own copy of what is
// the same in all of an instance's bindings: the labels, the owner
// reference, the subjects, the role and binding names, the namespace
// (shared with every other instance's binding there). LeanBindings shares
// those parts between the cached objects, so that a binding costs its
// struct, UID and resourceVersion.
//
// Sharing is safe because cached objects are read-only: reads through the
// client return deep copies (a copy gets its own maps and slices), and the
// code that reads the cache without copying (UnsafeDisableDeepCopy, the
// binding index) only reads; the write engine copies an object before it
// changes it.

// internLimit bounds each table of shared parts: when one is full it starts
// afresh (objects keep what they share; new ones share anew), so that a
// cluster whose bindings change names over months does not grow it without
// bound.
const internLimit = 4096

// interner holds the shared parts, keyed by their contents.
type interner struct {
	mu       sync.Mutex
	strs     map[string]string
	labels   map[string]map[string]string
	owners   map[string][]metav1.OwnerReference
	subjects map[string][]rbacv1.Subject
}

func newInterner() *interner {
	return &interner{
		strs:     map[string]string{},
		labels:   map[string]map[string]string{},
		owners:   map[string][]metav1.OwnerReference{},
		subjects: map[string][]rbacv1.Subject{},
	}
}

// intern returns the value of table under key, storing v there first when
// there is none; the table is emptied when it is full.
func intern[V any](table *map[string]V, key string, v V) V {
	if have, ok := (*table)[key]; ok {
		return have
	}
	if len(*table) >= internLimit {
		*table = make(map[string]V, internLimit)
	}
	(*table)[key] = v
	return v
}

func (in *interner) str(s string) string {
	if s == "" {
		return s
	}
	return intern(&in.strs, s, s)
}

// sep separates the fields of a key: it cannot occur in a label, name,
// kind or UID.
const sep = "\x00"

func (in *interner) labelMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + sep + m[k] + sep)
	}
	key := b.String()
	if have, ok := in.labels[key]; ok {
		return have
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[in.str(k)] = in.str(v)
	}
	return intern(&in.labels, key, out)
}

func boolKey(b *bool) string {
	switch {
	case b == nil:
		return "-"
	case *b:
		return "t"
	}
	return "f"
}

func (in *interner) ownerRefs(refs []metav1.OwnerReference) []metav1.OwnerReference {
	if len(refs) == 0 {
		return refs
	}
	var b strings.Builder
	for _, r := range refs {
		b.WriteString(strings.Join([]string{r.APIVersion, r.Kind, r.Name, string(r.UID), boolKey(r.Controller), boolKey(r.BlockOwnerDeletion)}, sep) + sep)
	}
	return intern(&in.owners, b.String(), refs)
}

func (in *interner) subjectList(subj []rbacv1.Subject) []rbacv1.Subject {
	if len(subj) == 0 {
		return subj
	}
	var b strings.Builder
	for _, s := range subj {
		b.WriteString(strings.Join([]string{s.Kind, s.APIGroup, s.Name, s.Namespace}, sep) + sep)
	}
	return intern(&in.subjects, b.String(), subj)
}

func (in *interner) roleRef(r rbacv1.RoleRef) rbacv1.RoleRef {
	return rbacv1.RoleRef{APIGroup: in.str(r.APIGroup), Kind: in.str(r.Kind), Name: in.str(r.Name)}
}

// meta shares the parts of m that repeat across bindings, in place.
func (in *interner) meta(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	m.Name = in.str(m.Name)
	m.Namespace = in.str(m.Namespace)
	m.Labels = in.labelMap(m.Labels)
	m.OwnerReferences = in.ownerRefs(m.OwnerReferences)
}

// LeanBindings is the cache transform of RoleBindings and
// ClusterRoleBindings: managedFields dropped (as for every cached object)
// and the repeating parts shared (see above). Other objects pass through
// with managedFields dropped. The shared parts belong to the transform
// (one per cache: the manager's), not to the process.
func LeanBindings() toolscache.TransformFunc {
	shared := newInterner()
	strip := cache.TransformStripManagedFields()
	return func(obj any) (any, error) {
		switch b := obj.(type) {
		case *rbacv1.RoleBinding:
			shared.binding(&b.ObjectMeta, &b.RoleRef, &b.Subjects)
		case *rbacv1.ClusterRoleBinding:
			shared.binding(&b.ObjectMeta, &b.RoleRef, &b.Subjects)
		default:
			return strip(obj)
		}
		return obj, nil
	}
}

func (in *interner) binding(m *metav1.ObjectMeta, ref *rbacv1.RoleRef, subj *[]rbacv1.Subject) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.meta(m)
	*ref = in.roleRef(*ref)
	*subj = in.subjectList(*subj)
}
