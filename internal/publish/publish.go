// Package publish holds the pure parts of a ScopeInstance's publication
// (spec.publication, after IBM's NamespaceScope): the published value, the
// server-side apply configurations of the ConfigMap key and of the restart
// annotation, and the restart decision with its coalescing. Package
// publisher carries them out for the ScopeInstance controller, the one
// writer of the published keys and of the restarts (through package
// engine); this package writes nothing, so the guard may import it.
//
// The value is the comma-separated, sorted list of the namespaces where the
// instance's bindings are in place (status.boundNamespaces of the same
// reconcile), plus, by default, the ConfigMap's own namespace: an operator
// that reads it as WATCH_NAMESPACE never watches a namespace it has no RBAC
// in. A cluster-wide instance publishes "" (operator-sdk's "all
// namespaces") once its ClusterRoleBindings are in place.
//
// Restarts are coalesced: the workloads are restarted for a list once it
// has stayed unchanged for a quiet period (or, while the list keeps
// changing, once the first unrestarted change is older than a maximum
// delay), and the restart annotation is the hash of the list, so a list
// that was already rolled out never restarts anything again.
package publish

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
)

// Defaults of the restart coalescing.
const (
	// DefaultQuiet is how long the list must stay unchanged before the
	// workloads are restarted for it: a burst of namespace events (a
	// 2,000-namespace fan-out, 200 namespaces labelled at once) is handled
	// by reconciles less than a second apart, and restarts once.
	DefaultQuiet = 3 * time.Second
	// DefaultMaxDelay bounds how long a changed list waits for a restart
	// while it keeps changing.
	DefaultMaxDelay = 30 * time.Second
)

// FieldOwner is the server-side apply field manager of instance's
// publication writes: one per instance, so that instances publishing into
// the same ConfigMap (different keys) or restarting the same workload never
// remove each other's fields.
func FieldOwner(instance string) string {
	return oriav1alpha1.PublicationFieldOwnerPrefix + names.LabelValue(instance)
}

// AnnotationKey is the annotation by which a ConfigMap records that
// instance publishes into it (its value is the key).
func AnnotationKey(instance string) string {
	return oriav1alpha1.AnnotationPublishedPrefix + names.LabelValue(instance)
}

// Namespaces returns the published namespaces: bound, plus the ConfigMap's
// namespace unless the publication excludes it, sorted and without
// duplicates.
func Namespaces(pub oriav1alpha1.Publication, bound []string) []string {
	out := slices.Clone(bound)
	if pub.IncludesConfigMapNamespace() {
		out = append(out, pub.ConfigMap.Namespace)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Value is the published string of namespaces (IBM NamespaceScope's
// format, "default,cp4i").
func Value(namespaces []string) string {
	return strings.Join(namespaces, ",")
}

// Hash identifies a published value (status.publication.hash and the
// restart annotation).
func Hash(value string) string {
	return names.Hash("publication", value)
}

// ConfigMapName is "<namespace>/<name>:<key>", for status and messages.
func ConfigMapName(ref oriav1alpha1.ConfigMapKeyReference) string {
	return ref.Namespace + "/" + ref.Name + ":" + ref.KeyOrDefault()
}

// ConfigMap is the apply configuration of instance's key: the key, the
// published label (which puts the ConfigMap in oria's cache) and the
// annotation recording the instance. Applied with FieldOwner(instance) and
// without force, so that a key another manager holds is a conflict. uid is
// the UID of the ConfigMap as oria read it ("" when it was not read): a
// server-side apply creates what does not exist, and one naming a UID
// fails instead, so a ConfigMap deleted since it was read is never created
// anew, without the ownerReference that would take it away with its
// instance (see Gone).
func ConfigMap(instance string, ref oriav1alpha1.ConfigMapKeyReference, value string, uid types.UID) *corev1ac.ConfigMapApplyConfiguration {
	ac := corev1ac.ConfigMap(ref.Name, ref.Namespace).
		WithLabels(map[string]string{oriav1alpha1.LabelPublished: "true"}).
		WithAnnotations(map[string]string{AnnotationKey(instance): ref.KeyOrDefault()}).
		WithData(map[string]string{ref.KeyOrDefault(): value})
	if uid != "" {
		ac.WithUID(uid)
	}
	return ac
}

// Withdrawal is the apply configuration that removes everything instance
// wrote into the ConfigMap with this UID (an apply that names no field
// gives up every field its manager owned). The UID makes the apply fail
// rather than create an empty ConfigMap when the one read was deleted
// meanwhile (by the garbage collector, with its instance).
func Withdrawal(namespace, name string, uid types.UID) *corev1ac.ConfigMapApplyConfiguration {
	return corev1ac.ConfigMap(name, namespace).WithUID(uid)
}

// Current reports whether cm already holds what ConfigMap would write, so
// that an unchanged world makes no write.
func Current(cm metav1.Object, data map[string]string, instance string, ref oriav1alpha1.ConfigMapKeyReference, value string) bool {
	v, ok := data[ref.KeyOrDefault()]
	return ok && v == value &&
		cm.GetLabels()[oriav1alpha1.LabelPublished] == "true" &&
		cm.GetAnnotations()[AnnotationKey(instance)] == ref.KeyOrDefault()
}

// Disposable reports whether a ConfigMap oria withdrew from can be deleted:
// nothing is left in it and nobody but oria's publications ever wrote a
// field of it (oria created it).
func Disposable(data map[string]string, binaryData map[string][]byte, managed []metav1.ManagedFieldsEntry) bool {
	if len(data) > 0 || len(binaryData) > 0 {
		return false
	}
	for _, m := range managed {
		if !strings.HasPrefix(m.Manager, oriav1alpha1.PublicationFieldOwnerPrefix) {
			return false
		}
	}
	return true
}

// Workload kinds a publication restarts.
const (
	KindDeployment  = "Deployment"
	KindStatefulSet = "StatefulSet"
	KindDaemonSet   = "DaemonSet"
)

// WorkloadKinds are the kinds restarted, in the order they are restarted.
var WorkloadKinds = []string{KindDeployment, KindStatefulSet, KindDaemonSet}

// Restart returns the apply configuration that sets the restart annotation
// of a workload's pod template to hash: a rollout when the value changes
// (as kubectl rollout restart's restartedAt), nothing when it is already
// there. It names the UID of the workload listed: one deleted since, or
// replaced by another of its name (which the restart labels may not
// select), is left alone (engine.Gone), never created or restarted. nil
// for an unknown kind.
func Restart(kind, namespace, name string, uid types.UID, hash string) runtime.ApplyConfiguration {
	tmpl := corev1ac.PodTemplateSpec().WithAnnotations(map[string]string{oriav1alpha1.AnnotationRestartedFor: hash})
	switch kind {
	case KindDeployment:
		return appsv1ac.Deployment(name, namespace).WithUID(uid).WithSpec(appsv1ac.DeploymentSpec().WithTemplate(tmpl))
	case KindStatefulSet:
		return appsv1ac.StatefulSet(name, namespace).WithUID(uid).WithSpec(appsv1ac.StatefulSetSpec().WithTemplate(tmpl))
	case KindDaemonSet:
		return appsv1ac.DaemonSet(name, namespace).WithUID(uid).WithSpec(appsv1ac.DaemonSetSpec().WithTemplate(tmpl))
	}
	return nil
}

// Validate returns why pub's restart labels cannot select workloads, or
// nil (the schema checks the rest).
func Validate(pub *oriav1alpha1.Publication) error {
	if pub == nil {
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(pub.RestartLabels)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("spec.publication.restartLabels: key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(pub.RestartLabels[k]); len(errs) > 0 {
			return fmt.Errorf("spec.publication.restartLabels: value %q of %q: %s", pub.RestartLabels[k], k, strings.Join(errs, "; "))
		}
	}
	return nil
}
