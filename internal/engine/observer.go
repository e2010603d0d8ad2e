package engine

import "k8s.io/apimachinery/pkg/runtime"

func (e *Engine) observe(kind string, out []Outcome) []Outcome {
	if len(out) > 0 {
		e.observer(kind, out)
	}
	return out
}

// applyKind is the kind an apply configuration names, for the observer.
func applyKind(acs []runtime.ApplyConfiguration) string {
	for _, ac := range acs {
		if k, ok := ac.(interface{ GetKind() *string }); ok && k.GetKind() != nil {
			return *k.GetKind()
		}
	}
	return ""
}
