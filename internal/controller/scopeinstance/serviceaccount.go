package scopeinstance

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
)

// The ceiling's ServiceAccount (spec.serviceAccount): whether it exists,
// and the writer that grants as it (see ceiling.go for what it vouches
// for).

// checkServiceAccount returns a SpecError (ServiceAccountNotFound) when the
// instance names a ServiceAccount that does not exist: nothing new is
// written for it then (existing bindings are kept), and the instance looks
// again later. One metadata-only read, for instances with a ceiling only.
func (r *Reconciler) checkServiceAccount(ctx context.Context, si *oriav1alpha1.ScopeInstance) (*binding.SpecError, error) {
	sa := si.Spec.ServiceAccount
	if sa == nil {
		return nil, nil
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ServiceAccount"))
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: sa.Namespace, Name: sa.Name}, m)
	switch {
	case apierrors.IsNotFound(err):
		return &binding.SpecError{Reason: oriav1alpha1.ReasonServiceAccountNotFound, Message: fmt.Sprintf(
			"ServiceAccount %q in namespace %q (spec.serviceAccount) does not exist; nothing new is bound until it does, existing bindings are kept",
			sa.Name, sa.Namespace)}, nil
	case err != nil:
		return nil, fmt.Errorf("reading ServiceAccount %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	return nil, nil
}

// writerFor returns the writer of si's bindings: oria's own, or, for an
// instance with a ceiling, one that grants as its ServiceAccount (and
// revokes as oria: taking access away needs no ceiling).
func (r *Reconciler) writerFor(si *oriav1alpha1.ScopeInstance) (*engine.Writer, error) {
	w := r.writer()
	if sa := si.Spec.ServiceAccount; sa != nil {
		c, err := r.Impersonators.For(sa.Namespace, sa.Name)
		if err != nil {
			return nil, err
		}
		w.Client, w.Ceiling = c, true
	}
	return w, nil
}
