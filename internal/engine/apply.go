package engine

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

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
