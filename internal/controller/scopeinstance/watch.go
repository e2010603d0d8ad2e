package scopeinstance

import (
	"context"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/publish"
	"github.com/operator-framework/oria/internal/publisher"
)

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets,verbs=list;patch

// publisher is the publication step of a reconcile (package publish),
// writing as oria.
func (r *Reconciler) publisher() *publisher.Publisher {
	return &publisher.Publisher{Cache: r.Client, APIReader: r.APIReader, Writer: r.writer(), Recorder: r.Recorder, Timing: r.opts.Timing}
}

// instancesForConfigMap maps a ConfigMap oria publishes into to the
// instances that name it or published into it. An instance that published
// into it and no longer exists (deleted while oria was not running) maps to
// its name as the annotation records it: the reconcile finds nothing and
// withdraws (Cleanup).
func (r *Reconciler) instancesForConfigMap(ctx context.Context, o client.Object) []string {
	var all oriav1alpha1.ScopeInstanceList
	if err := r.Client.List(ctx, &all, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var out []string
	exists := map[string]bool{}
	for _, si := range all.Items {
		exists[names.LabelValue(si.Name)] = true
		pub := si.Spec.Publication
		_, published := o.GetAnnotations()[publish.AnnotationKey(si.Name)]
		if published || (pub != nil && pub.ConfigMap.Namespace == o.GetNamespace() && pub.ConfigMap.Name == o.GetName()) {
			out = append(out, si.Name)
		}
	}
	for k := range o.GetAnnotations() {
		if name, ok := strings.CutPrefix(k, oriav1alpha1.AnnotationPublishedPrefix); ok && !exists[name] {
			out = append(out, name)
		}
	}
	return out
}
