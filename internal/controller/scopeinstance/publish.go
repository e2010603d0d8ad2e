package scopeinstance

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/manager"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/publish"
)

// Event reasons of a publication.
const (
	EventPublished          = "Published"
	EventWorkloadsRestarted = "WorkloadsRestarted"
)

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets,verbs=list;patch

// published is what the publication step of one reconcile did.
type published struct {
	// status is the new status.publication (nil: no publication).
	status *oriav1alpha1.PublicationStatus
	// conflict names a key someone else manages; nothing was written.
	conflict string
	// noNamespace is the ConfigMap's namespace, which does not exist (yet):
	// nothing was written; its creation brings the instance back.
	noNamespace string
	// err is a failed write, retried.
	err error
	// after is when a coalesced restart is due.
	after time.Duration
}

// publish keeps si's ConfigMap key equal to the namespaces where its
// bindings are in place (bound) and restarts the labelled workloads once
// per change of the list, coalesced (package publish). It runs after the
// bindings were written and before stale ones are deleted: a namespace
// enters the list only once its bindings exist and leaves it before they
// go. It first withdraws from every ConfigMap si published into and no
// longer names.
func (r *Reconciler) publish(ctx context.Context, si *oriav1alpha1.ScopeInstance, p *plan, bound []string, bindingsOK bool) published {
	pub := si.Spec.Publication
	var keep *oriav1alpha1.ConfigMapKeyReference
	if pub != nil {
		keep = &pub.ConfigMap
	}
	if err := r.withdraw(ctx, si.Name, keep); err != nil {
		return published{status: si.Status.Publication, err: err}
	}
	if pub == nil {
		return published{}
	}
	prev := si.Status.Publication
	if prev != nil && prev.ConfigMap != publish.ConfigMapName(pub.ConfigMap) {
		prev = nil // another ConfigMap: a new publication
	}
	var nss []string
	if p.targets.Cluster {
		// "" is "every namespace" to an operator; only once the
		// ClusterRoleBindings are in place.
		if !bindingsOK {
			return published{status: prev}
		}
	} else {
		nss = publish.Namespaces(*pub, bound)
	}
	value := publish.Value(nss)
	if exists, err := r.namespaceExists(ctx, pub.ConfigMap.Namespace); err != nil || !exists {
		noNamespace := ""
		if !exists {
			noNamespace = pub.ConfigMap.Namespace
		}
		return published{status: prev, noNamespace: noNamespace, err: err}
	}
	conflict, err := r.applyKey(ctx, si.Name, pub.ConfigMap, value)
	if conflict != "" || err != nil {
		return published{status: prev, conflict: conflict, err: err}
	}
	now := metav1.Now()
	restart := len(pub.RestartLabels) > 0
	st := publish.Observe(prev, publish.ConfigMapName(pub.ConfigMap), publish.Hash(value), len(nss), restart, now)
	if prev == nil || prev.Hash != st.Hash {
		r.event(si, corev1.EventTypeNormal, EventPublished, "Publish", "published %d namespace(s) in ConfigMap %s", len(nss), st.ConfigMap)
	}
	due, after := publish.Due(st, restart, now.Time, r.Timing)
	if !due {
		return published{status: &st, after: after}
	}
	workloads, err := r.restart(ctx, si.Name, pub.ConfigMap.Namespace, pub.RestartLabels, st.Hash)
	if err != nil {
		return published{status: &st, err: err}
	}
	st = publish.Restarted(st, workloads, now)
	if len(workloads) == 0 {
		return published{status: &st}
	}
	r.event(si, corev1.EventTypeNormal, EventWorkloadsRestarted, "Restart", "restarted %d workload(s) in namespace %s for a list of %d namespace(s): %s",
		len(workloads), pub.ConfigMap.Namespace, len(nss), strings.Join(workloads, ", "))
	return published{status: &st}
}

// applyKey writes the key when the cached ConfigMap does not hold it
// already. A key another field manager holds with another value is a
// conflict (server-side apply without force): it is left as it is.
func (r *Reconciler) applyKey(ctx context.Context, instance string, ref oriav1alpha1.ConfigMapKeyReference, value string) (string, error) {
	cm := &corev1.ConfigMap{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, cm)
	switch {
	case err == nil && publish.Current(cm, cm.Data, instance, ref, value):
		return "", nil
	case err != nil && !apierrors.IsNotFound(err):
		return "", fmt.Errorf("reading ConfigMap %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	err = r.Client.Apply(ctx, publish.ConfigMap(instance, ref, value), client.FieldOwner(publish.FieldOwner(instance)))
	if apierrors.IsConflict(err) {
		return fmt.Sprintf("key %q of ConfigMap %s/%s is managed by someone else (%s)", ref.KeyOrDefault(), ref.Namespace, ref.Name, err), nil
	}
	if err != nil {
		return "", fmt.Errorf("publishing into ConfigMap %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return "", nil
}

// restart sets the restart annotation to hash on every Deployment,
// StatefulSet and DaemonSet in namespace whose labels match sel, and
// returns them as "<Kind>/<name>". The workloads are listed, metadata only
// and by label, from the API server, only when a restart is due: oria
// caches no workload.
func (r *Reconciler) restart(ctx context.Context, instance, namespace string, sel map[string]string, hash string) ([]string, error) {
	var out []string
	for _, kind := range publish.WorkloadKinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind(kind + "List"))
		if err := r.APIReader.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels(sel)); err != nil {
			return nil, fmt.Errorf("listing %ss to restart in namespace %s: %w", kind, namespace, err)
		}
		for _, w := range list.Items {
			if w.DeletionTimestamp != nil {
				continue
			}
			ac := publish.Restart(kind, namespace, w.Name, hash)
			if err := r.Client.Apply(ctx, ac, client.FieldOwner(publish.FieldOwner(instance)), client.ForceOwnership); err != nil {
				return nil, fmt.Errorf("restarting %s %s/%s: %w", kind, namespace, w.Name, err)
			}
			out = append(out, kind+"/"+w.Name)
		}
	}
	return out, nil
}

// withdraw removes what instance wrote into every ConfigMap it publishes
// into other than keep (nil: all of them, for a deleted instance or a
// removed publication), and deletes a ConfigMap oria created once nothing
// is left in it.
func (r *Reconciler) withdraw(ctx context.Context, instance string, keep *oriav1alpha1.ConfigMapKeyReference) error {
	var list corev1.ConfigMapList
	if err := r.Client.List(ctx, &list, client.MatchingLabelsSelector{Selector: manager.PublishedSelector()}); err != nil {
		return fmt.Errorf("listing the ConfigMaps oria publishes into: %w", err)
	}
	for i := range list.Items {
		cm := &list.Items[i]
		if _, ok := cm.Annotations[publish.AnnotationKey(instance)]; !ok {
			continue
		}
		if keep != nil && keep.Namespace == cm.Namespace && keep.Name == cm.Name {
			continue
		}
		if err := r.withdrawFrom(ctx, instance, cm.Namespace, cm.Name); err != nil {
			return err
		}
	}
	return nil
}

func (r *Reconciler) withdrawFrom(ctx context.Context, instance, namespace, name string) error {
	ac := publish.Withdrawal(namespace, name)
	err := r.Client.Apply(ctx, ac, client.FieldOwner(publish.FieldOwner(instance)))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("withdrawing from ConfigMap %s/%s: %w", namespace, name, err)
	}
	// The API server's copy, with managedFields: did anyone but oria ever
	// write it?
	cm := &corev1.ConfigMap{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading ConfigMap %s/%s: %w", namespace, name, err)
	}
	if !publish.Disposable(cm.Data, cm.BinaryData, cm.ManagedFields) {
		return nil
	}
	err = r.Client.Delete(ctx, cm, client.Preconditions{UID: &cm.UID, ResourceVersion: &cm.ResourceVersion})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting ConfigMap %s/%s, which oria created and which is now empty: %w", namespace, name, err)
	}
	return nil
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

func (r *Reconciler) event(si *oriav1alpha1.ScopeInstance, typ, reason, action, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(si, nil, typ, reason, action, format, args...)
	}
}

// namespaceExists reads the namespace from the metadata cache.
func (r *Reconciler) namespaceExists(ctx context.Context, name string) (bool, error) {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	err := r.Client.Get(ctx, types.NamespacedName{Name: name}, ns)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading namespace %q: %w", name, err)
	}
	return true, nil
}

// instancesPublishingIn returns the instances that publish into a ConfigMap
// of namespace: its creation lets them publish.
func (r *Reconciler) instancesPublishingIn(ctx context.Context, namespace string) []string {
	var all oriav1alpha1.ScopeInstanceList
	if err := r.Client.List(ctx, &all, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing ScopeInstances")
		return nil
	}
	var out []string
	for _, si := range all.Items {
		if pub := si.Spec.Publication; pub != nil && pub.ConfigMap.Namespace == namespace {
			out = append(out, si.Name)
		}
	}
	return out
}
