package engine

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

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
