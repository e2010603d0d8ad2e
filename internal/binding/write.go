package binding

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// DefaultWorkers bounds how many writes a reconcile has in flight. The
// client's QPS and burst are the real throttle; the pool only keeps a
// 2,000-namespace fan-out from starting 2,000 goroutines at once.
const DefaultWorkers = 64

// Action is what the engine did with one object.
type Action int

// Actions, in the order a summary lists them.
const (
	// Unchanged: the object was already as intended.
	Unchanged Action = iota
	// Created: the object did not exist and was created.
	Created
	// Updated: oria's object had drifted and was repaired.
	Updated
	// Replaced: the object had an immutable field (a binding's roleRef)
	// that differed, so it was deleted and created again.
	Replaced
	// Deleted: the object is no longer intended and was deleted.
	Deleted
	// Conflict: an object of that name exists that oria did not create for
	// this owner; it was left alone.
	Conflict
	// Skipped: the object's namespace is being deleted (or is gone), so
	// nothing can be created there; not an error.
	Skipped
	// Failed: the API server refused the write; Err says why.
	Failed
)

// Outcome is the result of one object's write.
type Outcome struct {
	Namespace string
	Name      string
	Action    Action
	// Err is set for Failed (the error) and Conflict (a description).
	Err error
}

// Writer performs the writes of a reconcile: creates with Create (so that an
// existing object oria did not create is detected, never overwritten),
// repairs with server-side apply, deletes, all fanned out over a bounded
// worker pool. One object's failure never stops the others; every object gets
// an Outcome.
type Writer struct {
	// Client writes, and reads from the (oria-labelled) cache.
	Client client.Client
	// Reader reads from the API server directly: an object the cache does
	// not show may still exist without oria's labels.
	Reader client.Reader
	// Workers bounds parallel writes; DefaultWorkers when 0.
	Workers int
}

// Kind describes one object kind to the engine.
type Kind[T client.Object] struct {
	// Name is the kind, for messages.
	Name string
	// New returns an empty object to read into.
	New func() T
	// Owned reports whether cur was created by oria for the named owner.
	Owned func(cur T, owner string) bool
	// UpToDate reports whether cur has everything of want.
	UpToDate func(cur, want T) bool
	// Replace reports whether cur must be deleted and created again to
	// become want (an immutable field differs).
	Replace func(cur, want T) bool
	// Apply is want as an apply configuration (the full intended object).
	Apply func(want T) runtime.ApplyConfiguration
	// Merge returns cur with want's labels, controller and content, for an
	// update that must also drop a stale controller reference.
	Merge func(cur, want T) T
}

// Key returns the namespace/name of obj.
func Key(obj client.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

func (w *Writer) workers() int {
	if w.Workers > 0 {
		return w.Workers
	}
	return DefaultWorkers
}

// parallel calls fn(i) for i in [0,n) on at most workers goroutines.
func parallel(workers, n int, fn func(i int)) {
	if workers > n {
		workers = n
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}

// Ensure makes every object of desired exist as intended. cached holds the
// owner's objects as the cache shows them (by Key); those equal to their
// intended state cost nothing. The result has one Outcome per desired
// object, in order.
func Ensure[T client.Object](ctx context.Context, w *Writer, k Kind[T], owner string, desired []T, cached map[types.NamespacedName]T) []Outcome {
	out := make([]Outcome, len(desired))
	var todo []int
	for i, want := range desired {
		out[i] = Outcome{Namespace: want.GetNamespace(), Name: want.GetName()}
		cur, ok := cached[Key(want)]
		switch {
		case !ok:
			todo = append(todo, i)
		case !k.Owned(cur, owner):
			out[i].Action, out[i].Err = Conflict, conflictError(k.Name, cur)
		case !k.UpToDate(cur, want):
			todo = append(todo, i)
		}
	}
	parallel(w.workers(), len(todo), func(j int) {
		i := todo[j]
		want := desired[i]
		cur, ok := cached[Key(want)]
		if ok {
			out[i].Action, out[i].Err = repair(ctx, w, k, cur, want)
		} else {
			out[i].Action, out[i].Err = create(ctx, w, k, owner, want)
		}
	})
	return out
}

// create creates want; when an object of that name exists after all (the
// cache lags, or the object lacks oria's labels) it reads it from the API
// server and repairs it if it is oria's, or reports a conflict.
func create[T client.Object](ctx context.Context, w *Writer, k Kind[T], owner string, want T) (Action, error) {
	err := w.Client.Create(ctx, want.DeepCopyObject().(client.Object), client.FieldOwner(oriav1alpha1.FieldOwner))
	switch {
	case err == nil:
		return Created, nil
	case namespaceGone(err):
		return Skipped, nil
	case !apierrors.IsAlreadyExists(err):
		return Failed, fmt.Errorf("creating %s %s: %w", k.Name, describe(want), err)
	}
	live := k.New()
	if err := w.Reader.Get(ctx, Key(want), live); err != nil {
		return Failed, fmt.Errorf("reading existing %s %s: %w", k.Name, describe(want), err)
	}
	if !k.Owned(live, owner) {
		return Conflict, conflictError(k.Name, live)
	}
	if k.UpToDate(live, want) {
		return Unchanged, nil
	}
	return repair(ctx, w, k, live, want)
}

// repair turns oria's object cur into want: delete and create when an
// immutable field differs, update when its controller reference is stale (a
// server-side apply cannot remove a reference that the Create wrote), and
// otherwise server-side apply of the full intended object, forcing oria's
// values over whatever edited them.
func repair[T client.Object](ctx context.Context, w *Writer, k Kind[T], cur, want T) (Action, error) {
	if k.Replace(cur, want) {
		uid := cur.GetUID()
		if err := w.Client.Delete(ctx, cur, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return Failed, fmt.Errorf("deleting %s %s to replace it: %w", k.Name, describe(cur), err)
		}
		if err := w.Client.Create(ctx, want.DeepCopyObject().(client.Object), client.FieldOwner(oriav1alpha1.FieldOwner)); err != nil {
			if namespaceGone(err) {
				return Skipped, nil
			}
			return Failed, fmt.Errorf("creating %s %s: %w", k.Name, describe(want), err)
		}
		return Replaced, nil
	}
	if !controlledBy(cur.GetOwnerReferences(), want.GetOwnerReferences()[0]) {
		if err := w.Client.Update(ctx, k.Merge(cur, want), client.FieldOwner(oriav1alpha1.FieldOwner)); err != nil {
			return Failed, fmt.Errorf("updating %s %s: %w", k.Name, describe(want), err)
		}
		return Updated, nil
	}
	if err := w.Client.Apply(ctx, k.Apply(want), client.FieldOwner(oriav1alpha1.FieldOwner), client.ForceOwnership); err != nil {
		return Failed, fmt.Errorf("applying %s %s: %w", k.Name, describe(want), err)
	}
	return Updated, nil
}

// Delete deletes objs in parallel; an object already gone counts as
// deleted.
func Delete[T client.Object](ctx context.Context, w *Writer, kindName string, objs []T) []Outcome {
	out := make([]Outcome, len(objs))
	parallel(w.workers(), len(objs), func(i int) {
		obj := objs[i]
		out[i] = Outcome{Namespace: obj.GetNamespace(), Name: obj.GetName(), Action: Deleted}
		uid := obj.GetUID()
		if err := w.Client.Delete(ctx, obj, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			out[i].Action, out[i].Err = Failed, fmt.Errorf("deleting %s %s: %w", kindName, describe(obj), err)
		}
	})
	return out
}

// namespaceGone reports whether a create failed because its namespace is
// being deleted or no longer exists: expected while namespaces come and go,
// and not worth a retry.
func namespaceGone(err error) bool {
	return apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) ||
		(apierrors.IsNotFound(err) && isNamespaceNotFound(err))
}

func isNamespaceNotFound(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Kind == "namespaces"
}

func describe(obj client.Object) string {
	if obj.GetNamespace() != "" {
		return fmt.Sprintf("%q in namespace %q", obj.GetName(), obj.GetNamespace())
	}
	return fmt.Sprintf("%q", obj.GetName())
}

// ConflictError says that an object oria would write exists and is not
// oria's (for this owner).
type ConflictError struct {
	Kind      string
	Namespace string
	Name      string
}

func (e *ConflictError) Error() string {
	if e.Namespace != "" {
		return fmt.Sprintf("%s %q in namespace %q exists and was not created by oria for this object", e.Kind, e.Name, e.Namespace)
	}
	return fmt.Sprintf("%s %q exists and was not created by oria for this object", e.Kind, e.Name)
}

func conflictError(kind string, obj client.Object) error {
	return &ConflictError{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// ownerRefApply converts an ownerReference.
func ownerRefApply(r metav1.OwnerReference) *metav1ac.OwnerReferenceApplyConfiguration {
	ac := metav1ac.OwnerReference().WithAPIVersion(r.APIVersion).WithKind(r.Kind).WithName(r.Name).WithUID(r.UID)
	if r.Controller != nil {
		ac.WithController(*r.Controller)
	}
	if r.BlockOwnerDeletion != nil {
		ac.WithBlockOwnerDeletion(*r.BlockOwnerDeletion)
	}
	return ac
}

func subjectsApply(subjects []rbacv1.Subject) []*rbacv1ac.SubjectApplyConfiguration {
	out := make([]*rbacv1ac.SubjectApplyConfiguration, len(subjects))
	for i, s := range subjects {
		ac := rbacv1ac.Subject().WithKind(s.Kind).WithName(s.Name)
		if s.APIGroup != "" {
			ac.WithAPIGroup(s.APIGroup)
		}
		if s.Namespace != "" {
			ac.WithNamespace(s.Namespace)
		}
		out[i] = ac
	}
	return out
}

func roleRefApply(r rbacv1.RoleRef) *rbacv1ac.RoleRefApplyConfiguration {
	return rbacv1ac.RoleRef().WithAPIGroup(r.APIGroup).WithKind(r.Kind).WithName(r.Name)
}

// ClusterRoleApply is a generated ClusterRole as an apply configuration.
func ClusterRoleApply(cr *rbacv1.ClusterRole) *rbacv1ac.ClusterRoleApplyConfiguration {
	ac := rbacv1ac.ClusterRole(cr.Name).WithLabels(cr.Labels)
	for _, r := range cr.OwnerReferences {
		ac.WithOwnerReferences(ownerRefApply(r))
	}
	for _, r := range cr.Rules {
		ac.WithRules(rbacv1ac.PolicyRule().
			WithVerbs(r.Verbs...).WithAPIGroups(r.APIGroups...).WithResources(r.Resources...).
			WithResourceNames(r.ResourceNames...).WithNonResourceURLs(r.NonResourceURLs...))
	}
	return ac
}

// RoleBindingApply is a generated RoleBinding as an apply configuration.
func RoleBindingApply(rb *rbacv1.RoleBinding) *rbacv1ac.RoleBindingApplyConfiguration {
	ac := rbacv1ac.RoleBinding(rb.Name, rb.Namespace).WithLabels(rb.Labels).
		WithRoleRef(roleRefApply(rb.RoleRef)).WithSubjects(subjectsApply(rb.Subjects)...)
	for _, r := range rb.OwnerReferences {
		ac.WithOwnerReferences(ownerRefApply(r))
	}
	return ac
}

// ClusterRoleBindingApply is a generated ClusterRoleBinding as an apply
// configuration.
func ClusterRoleBindingApply(crb *rbacv1.ClusterRoleBinding) *rbacv1ac.ClusterRoleBindingApplyConfiguration {
	ac := rbacv1ac.ClusterRoleBinding(crb.Name).WithLabels(crb.Labels).
		WithRoleRef(roleRefApply(crb.RoleRef)).WithSubjects(subjectsApply(crb.Subjects)...)
	for _, r := range crb.OwnerReferences {
		ac.WithOwnerReferences(ownerRefApply(r))
	}
	return ac
}

// ClusterRoleKind is how the engine writes a template's inline ClusterRoles.
var ClusterRoleKind = Kind[*rbacv1.ClusterRole]{
	Name:     "ClusterRole",
	New:      func() *rbacv1.ClusterRole { return &rbacv1.ClusterRole{} },
	Owned:    ClusterRoleOwned,
	UpToDate: ClusterRoleUpToDate,
	Replace:  func(_, _ *rbacv1.ClusterRole) bool { return false },
	Apply:    func(want *rbacv1.ClusterRole) runtime.ApplyConfiguration { return ClusterRoleApply(want) },
	Merge: func(cur, want *rbacv1.ClusterRole) *rbacv1.ClusterRole {
		out := cur.DeepCopy()
		out.Labels = mergeLabels(cur.Labels, want.Labels)
		out.OwnerReferences = withOwner(cur.OwnerReferences, want.OwnerReferences[0])
		out.Rules = want.Rules
		return out
	},
}

// RoleBindingKind is how the engine writes an instance's RoleBindings.
var RoleBindingKind = Kind[*rbacv1.RoleBinding]{
	Name:     "RoleBinding",
	New:      func() *rbacv1.RoleBinding { return &rbacv1.RoleBinding{} },
	Owned:    func(cur *rbacv1.RoleBinding, owner string) bool { return BindingOwned(cur, owner) },
	UpToDate: RoleBindingUpToDate,
	Replace:  func(cur, want *rbacv1.RoleBinding) bool { return cur.RoleRef != want.RoleRef },
	Apply:    func(want *rbacv1.RoleBinding) runtime.ApplyConfiguration { return RoleBindingApply(want) },
	Merge: func(cur, want *rbacv1.RoleBinding) *rbacv1.RoleBinding {
		out := cur.DeepCopy()
		out.Labels = mergeLabels(cur.Labels, want.Labels)
		out.OwnerReferences = withOwner(cur.OwnerReferences, want.OwnerReferences[0])
		out.Subjects = want.Subjects
		return out
	},
}

// ClusterRoleBindingKind is how the engine writes an instance's
// ClusterRoleBindings.
var ClusterRoleBindingKind = Kind[*rbacv1.ClusterRoleBinding]{
	Name:     "ClusterRoleBinding",
	New:      func() *rbacv1.ClusterRoleBinding { return &rbacv1.ClusterRoleBinding{} },
	Owned:    func(cur *rbacv1.ClusterRoleBinding, owner string) bool { return BindingOwned(cur, owner) },
	UpToDate: ClusterRoleBindingUpToDate,
	Replace:  func(cur, want *rbacv1.ClusterRoleBinding) bool { return cur.RoleRef != want.RoleRef },
	Apply:    func(want *rbacv1.ClusterRoleBinding) runtime.ApplyConfiguration { return ClusterRoleBindingApply(want) },
	Merge: func(cur, want *rbacv1.ClusterRoleBinding) *rbacv1.ClusterRoleBinding {
		out := cur.DeepCopy()
		out.Labels = mergeLabels(cur.Labels, want.Labels)
		out.OwnerReferences = withOwner(cur.OwnerReferences, want.OwnerReferences[0])
		out.Subjects = want.Subjects
		return out
	},
}

// Summary aggregates the outcomes of a reconcile's writes.
type Summary struct {
	// Count is the number of objects per action.
	Count map[Action]int
	// Conflicts describe the objects left alone because oria did not create
	// them, in outcome order.
	Conflicts []error
	// Errors are the failed writes, in outcome order.
	Errors []error
	// Bad are the namespaces ("" for cluster-scoped objects) with a conflict
	// or a failure: not fully bound.
	Bad map[string]bool
}

// Summarize aggregates outcomes.
func Summarize(outcomes ...[]Outcome) Summary {
	s := Summary{Count: map[Action]int{}, Bad: map[string]bool{}}
	for _, list := range outcomes {
		for _, o := range list {
			s.Count[o.Action]++
			switch o.Action {
			case Conflict:
				s.Conflicts = append(s.Conflicts, o.Err)
				s.Bad[o.Namespace] = true
			case Failed:
				s.Errors = append(s.Errors, o.Err)
				s.Bad[o.Namespace] = true
			}
		}
	}
	return s
}

// Changed reports whether any object was written.
func (s Summary) Changed() bool {
	return s.Count[Created]+s.Count[Updated]+s.Count[Replaced]+s.Count[Deleted] > 0
}
