// Package publisher carries out a ScopeInstance's publication with the pure
// parts of package publish, through the engine: the guard imports publish,
// never this package, so the guard imports nothing that writes.
package publisher

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
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/lookup"
	"github.com/operator-framework/oria/internal/publish"
)

// Event reasons of a publication.
const (
	EventPublished          = "Published"
	EventWorkloadsRestarted = "WorkloadsRestarted"
)

// Publisher carries out a ScopeInstance's publication with the pure parts
// of this package: it is the one writer of the published ConfigMap keys
// and of the restarts, and writes them through the engine (engine.ApplyFields,
// engine.ApplyForced, engine.Withdraw, engine.CreateNew, engine.Disown,
// engine.DeleteUnchanged), as oria itself, never as an instance's
// ServiceAccount.
type Publisher struct {
	// Cache reads oria's cache: the ConfigMaps oria publishes into (the
	// published label) and namespaces (metadata).
	Cache client.Reader
	// APIReader reads from the API server: workloads (oria caches none)
	// and a withdrawn ConfigMap's managedFields.
	APIReader client.Reader
	// Writer writes.
	Writer *engine.Writer
	// Recorder emits Events on the instance.
	Recorder events.EventRecorder
	// Timing coalesces restarts.
	Timing publish.Timing
}

// Outcome is what one publication did.
type Outcome struct {
	// Status is the new status.publication (nil: no publication).
	Status *oriav1alpha1.PublicationStatus
	// Conflict names a key someone else manages; nothing was written.
	Conflict string
	// NoNamespace is the ConfigMap's namespace, which does not exist (yet):
	// nothing was written; its creation brings the instance back.
	NoNamespace string
	// Err is a failed write, retried.
	Err error
	// After is when a coalesced restart is due.
	After time.Duration
}

// Publish keeps si's ConfigMap key equal to bound, the namespaces where its
// bindings are in place (the list status.boundNamespaces reports), and
// restarts the labelled workloads once per change of the list, coalesced.
// cluster says that si binds cluster-wide: it then publishes "" once
// bindingsOK (its ClusterRoleBindings are in place). The caller runs it
// after the bindings were written and before stale ones are deleted: a
// namespace enters the list only once its bindings exist and leaves it
// before they go. It first withdraws from every ConfigMap si published into
// and no longer names. A ConfigMap that does not exist is created with an
// ownerReference to si (Creation): the one record by which oria deletes it
// later (see Dispose).
func (p *Publisher) Publish(ctx context.Context, si *oriav1alpha1.ScopeInstance, cluster bool, bound []string, bindingsOK bool) Outcome {
	pub := si.Spec.Publication
	var keep *oriav1alpha1.ConfigMapKeyReference
	if pub != nil {
		keep = &pub.ConfigMap
	}
	if err := p.withdraw(ctx, si.Name, si.UID, keep); err != nil {
		return Outcome{Status: si.Status.Publication, Err: err}
	}
	if pub == nil {
		return Outcome{}
	}
	prev := si.Status.Publication
	if prev != nil && prev.ConfigMap != publish.ConfigMapName(pub.ConfigMap) {
		prev = nil // another ConfigMap: a new publication
	}
	var nss []string
	if cluster {
		// "" is "every namespace" to an operator; only once the
		// ClusterRoleBindings are in place.
		if !bindingsOK {
			return Outcome{Status: prev}
		}
	} else {
		nss = publish.Namespaces(*pub, bound)
	}
	value := publish.Value(nss)
	if exists, err := p.namespaceExists(ctx, pub.ConfigMap.Namespace); err != nil || !exists {
		noNamespace := ""
		if !exists {
			noNamespace = pub.ConfigMap.Namespace
		}
		return Outcome{Status: prev, NoNamespace: noNamespace, Err: err}
	}
	conflict, err := p.applyKey(ctx, si, pub.ConfigMap, value)
	if conflict != "" || err != nil {
		return Outcome{Status: prev, Conflict: conflict, Err: err}
	}
	now := metav1.Now()
	restart := len(pub.RestartLabels) > 0
	st := publish.Observe(prev, publish.ConfigMapName(pub.ConfigMap), publish.Hash(value), len(nss), restart, now)
	if prev == nil || prev.Hash != st.Hash {
		p.event(si, EventPublished, "Publish", "published %d namespace(s) in ConfigMap %s", len(nss), st.ConfigMap)
	}
	due, after := publish.Due(st, restart, now.Time, p.Timing)
	if !due {
		return Outcome{Status: &st, After: after}
	}
	workloads, err := p.restart(ctx, si.Name, pub.ConfigMap.Namespace, pub.RestartLabels, st.Hash)
	if err != nil {
		return Outcome{Status: &st, Err: err}
	}
	st = publish.Restarted(st, workloads, now)
	if len(workloads) == 0 {
		return Outcome{Status: &st}
	}
	p.event(si, EventWorkloadsRestarted, "Restart", "restarted %d workload(s) in namespace %s for a list of %d namespace(s): %s",
		len(workloads), pub.ConfigMap.Namespace, len(nss), strings.Join(workloads, ", "))
	return Outcome{Status: &st}
}

// applyKey writes the key when the cached ConfigMap does not hold it
// already. A key another field manager holds with another value is a
// conflict (server-side apply without force): it is left as it is. A
// ConfigMap the cache does not show (it may exist without oria's label) is
// first created, with si's ownerReference, if it does not exist; one oria
// created for si in which others wrote keys loses that reference.
func (p *Publisher) applyKey(ctx context.Context, si *oriav1alpha1.ScopeInstance, ref oriav1alpha1.ConfigMapKeyReference, value string) (string, error) {
	cm := &corev1.ConfigMap{}
	err := p.Cache.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, cm)
	switch {
	case apierrors.IsNotFound(err):
		created := publish.Creation(si, ref)
		if _, err := engine.CreateNew(ctx, p.Writer, created, publish.FieldOwner(si.Name)); err != nil {
			return "", fmt.Errorf("creating ConfigMap %s/%s: %w", ref.Namespace, ref.Name, err)
		}
		// created's UID is the new ConfigMap's; "" when one existed
		// that the cache does not show.
		cm.UID = created.UID
	case err != nil:
		return "", fmt.Errorf("reading ConfigMap %s/%s: %w", ref.Namespace, ref.Name, err)
	default:
		if publish.Shared(cm, si.UID, ref.KeyOrDefault()) {
			if err := engine.Disown(ctx, p.Writer, cm, si.UID, publish.FieldOwner(si.Name)); err != nil {
				return "", fmt.Errorf("removing the ownerReference of ConfigMap %s/%s, in which others wrote keys: %w", ref.Namespace, ref.Name, err)
			}
		}
		if publish.Current(cm, cm.Data, si.Name, ref, value) {
			return "", nil
		}
	}
	conflict, err := engine.ApplyFields(ctx, p.Writer, publish.ConfigMap(si.Name, ref, value, cm.UID), publish.FieldOwner(si.Name))
	if engine.Gone(err) {
		// Deleted since it was read: its deletion brings si back.
		return "", nil
	}
	if conflict {
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
func (p *Publisher) restart(ctx context.Context, instance, namespace string, sel map[string]string, hash string) ([]string, error) {
	var out []string
	for _, kind := range publish.WorkloadKinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind(kind + "List"))
		if err := p.APIReader.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels(sel)); err != nil {
			return nil, fmt.Errorf("listing %ss to restart in namespace %s: %w", kind, namespace, err)
		}
		for _, w := range list.Items {
			if w.DeletionTimestamp != nil {
				continue
			}
			err := engine.ApplyForced(ctx, p.Writer, publish.Restart(kind, namespace, w.Name, w.UID, hash), publish.FieldOwner(instance))
			if engine.Gone(err) {
				continue // deleted, or replaced by another, since it was listed
			}
			if err != nil {
				return nil, fmt.Errorf("restarting %s %s/%s: %w", kind, namespace, w.Name, err)
			}
			out = append(out, kind+"/"+w.Name)
		}
	}
	return out, nil
}

// Withdraw removes what instance, deleted (gone, or being deleted), wrote into every
// ConfigMap it publishes into other than keep (every one without keep). It
// deletes no ConfigMap: an instance known only by its name (the annotation
// that records it can be written by anyone who may patch the ConfigMap)
// proves nothing, and the garbage collector deletes the ConfigMaps oria
// created for it (their ownerReference names it).
func (p *Publisher) Withdraw(ctx context.Context, instance string, keep *oriav1alpha1.ConfigMapKeyReference) error {
	return p.withdraw(ctx, instance, "", keep)
}

// withdraw is Withdraw for the instance with this UID ("" for one that no
// longer exists): a ConfigMap oria created for that very instance is then
// deleted once nothing is left in it, or disowned (Dispose).
func (p *Publisher) withdraw(ctx context.Context, instance string, uid types.UID, keep *oriav1alpha1.ConfigMapKeyReference) error {
	var list corev1.ConfigMapList
	if err := p.Cache.List(ctx, &list, client.MatchingLabelsSelector{Selector: lookup.PublishedSelector()}); err != nil {
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
		if err := p.withdrawFrom(ctx, instance, uid, cm); err != nil {
			return err
		}
	}
	return nil
}

func (p *Publisher) withdrawFrom(ctx context.Context, instance string, uid types.UID, cached *corev1.ConfigMap) error {
	namespace, name := cached.Namespace, cached.Name
	gone, err := engine.Withdraw(ctx, p.Writer, publish.Withdrawal(namespace, name, cached.UID), publish.FieldOwner(instance))
	if gone {
		return nil
	}
	if err != nil {
		return fmt.Errorf("withdrawing from ConfigMap %s/%s: %w", namespace, name, err)
	}
	// The ownerReference is set when oria creates the ConfigMap and never
	// added later: one the cache does not show it on is not oria's to
	// delete.
	if !publish.OwnedBy(cached.OwnerReferences, uid) {
		return nil
	}
	// The API server's copy after the withdrawal, with managedFields.
	cm := &corev1.ConfigMap{}
	if err := p.APIReader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading ConfigMap %s/%s: %w", namespace, name, err)
	}
	switch publish.Dispose(cm, uid) {
	case publish.Delete:
		if err := engine.DeleteUnchanged(ctx, p.Writer, cm); err != nil {
			return fmt.Errorf("deleting ConfigMap %s/%s, which oria created and which is now empty: %w", namespace, name, err)
		}
	case publish.Disown:
		if err := engine.Disown(ctx, p.Writer, cm, uid, publish.FieldOwner(instance)); err != nil {
			return fmt.Errorf("removing the ownerReference of ConfigMap %s/%s, which holds what others wrote: %w", namespace, name, err)
		}
	case publish.Keep:
	}
	return nil
}

// namespaceExists reads the namespace from the metadata cache.
func (p *Publisher) namespaceExists(ctx context.Context, name string) (bool, error) {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	err := p.Cache.Get(ctx, types.NamespacedName{Name: name}, ns)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading namespace %q: %w", name, err)
	}
	return true, nil
}

func (p *Publisher) event(si *oriav1alpha1.ScopeInstance, reason, action, format string, args ...any) {
	p.Recorder.Eventf(si, nil, corev1.EventTypeNormal, reason, action, format, args...)
}
