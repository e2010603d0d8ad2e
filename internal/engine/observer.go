package engine

import "k8s.io/apimachinery/pkg/runtime"

// Observer, when set, is called with the outcomes of every Ensure, Delete
// and Apply and the kind of their objects (internal/metrics counts writes
// with it). Set it once at start-up, before any reconcile; it must be safe
// for concurrent use.
var Observer func(kind string, outcomes []Outcome)

func observe(kind string, out []Outcome) []Outcome {
	if Observer != nil && len(out) > 0 {
		Observer(kind, out)
	}
	return out
}

// applyKind is the kind an apply configuration names, for Observer.
func applyKind(acs []runtime.ApplyConfiguration) string {
	for _, ac := range acs {
		if k, ok := ac.(interface{ GetKind() *string }); ok && k.GetKind() != nil {
			return *k.GetKind()
		}
	}
	return ""
}
