package engine

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// ApplyConfiguration returns the server-side apply request for a desired
// typed object: the object as it serializes, less what the server owns
// (creationTimestamp, resourceVersion, uid, managedFields, status) and less
// null fields, which an apply would otherwise claim. The object must carry
// its apiVersion and kind. This is the one conversion between the typed
// objects oria's pure functions build and what it applies.
func ApplyConfiguration(obj client.Object) (runtime.ApplyConfiguration, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		return nil, fmt.Errorf("object %q has no apiVersion/kind to apply", obj.GetName())
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %q for apply: %w", obj.GetName(), err)
	}
	delete(m, "status")
	for k, v := range m {
		if v == nil {
			delete(m, k)
		}
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		for _, k := range []string{"creationTimestamp", "resourceVersion", "uid", "managedFields", "generation"} {
			delete(md, k)
		}
	}
	return client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: m}), nil
}

// Apply server-side applies partial objects that are not oria's (the one
// label oria adds to a bundle-provided ClusterRole), in parallel, forcing
// oria's ownership of exactly the fields each names.
func Apply(ctx context.Context, w *Writer, acs []runtime.ApplyConfiguration, describe func(i int) string) []Outcome {
	out := make([]Outcome, len(acs))
	w.Engine.Parallel(w.workers(), len(acs), func(i int) {
		out[i] = Outcome{Name: describe(i), Action: Updated}
		if err := w.Client.Apply(ctx, acs[i], client.FieldOwner(oriav1alpha1.FieldOwner), client.ForceOwnership); err != nil {
			out[i].Action, out[i].Err = Failed, fmt.Errorf("applying %s: %w", describe(i), err)
		}
	})
	return w.Engine.observe(applyKind(acs), out)
}
