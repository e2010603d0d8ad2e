package engine

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// How the engine reads the API server's answers: a conflict with
// someone else's object, a write the ceiling refused, a namespace going
// away.

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

// refused turns the error of a write that grants into an action.
func (w *Writer) refused(err error, format string, args ...any) (Action, error) {
	wrapped := fmt.Errorf(format+": %w", append(args, err)...)
	if w.Ceiling && apierrors.IsForbidden(err) {
		return Forbidden, wrapped
	}
	return Failed, wrapped
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
