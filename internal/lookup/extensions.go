package lookup

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/olm"
)

// ExtensionCRDs returns the sorted names of the live CRDs operator-controller
// installed for the ClusterExtension named extension, from r (a manager's
// cache, which holds CRDs as metadata only: see manager.CacheOptions). It is
// the one definition of "the APIs of an extension" for the controllers and
// the admission guard.
func ExtensionCRDs(ctx context.Context, r client.Reader, extension string) ([]string, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(CRDMetadata().GroupVersionKind().GroupVersion().WithKind("CustomResourceDefinitionList"))
	if err := r.List(ctx, list, client.MatchingLabels(olm.OwnerLabels(extension))); err != nil {
		return nil, fmt.Errorf("listing the CustomResourceDefinitions of ClusterExtension %q: %w", extension, err)
	}
	out := make([]string, 0, len(list.Items))
	for _, crd := range list.Items {
		if crd.DeletionTimestamp.IsZero() {
			out = append(out, crd.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}
