// Package scheme is the one definition of the types oria reads and writes
// (Kubernetes' built-in types, CRDs, ClusterExtensions and oria's kinds),
// shared by the manager and the kubectl plugin, which must not link the
// manager.
package scheme

import (
	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// New returns a scheme with every type oria reads or writes.
func New() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		apiextensionsv1.AddToScheme,
		ocv1.AddToScheme,
		oriav1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}
