package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// fanoutPublish is the fan-out with a publication (issue 12): N namespaces,
// as in fanout, selected by one ScopeInstance that also publishes them into
// a ConfigMap in the first of them, with restart labels that match no
// workload (the restart's reads are made, no rollout). Its time runs until
// every RoleBinding exists and the ConfigMap lists every namespace; a
// target compares it with the fanout row's.
func (b *bench) fanoutPublish(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := newSpread("bench-fanpub", b.cfg.namespaces, 1)
	s.publication = &oriav1alpha1.Publication{
		ConfigMap:     oriav1alpha1.ConfigMapKeyReference{Namespace: s.namespaces[0], Name: s.name + "-scope"},
		RestartLabels: map[string]string{labelSpread + "-restart": s.name},
	}
	r := &Result{Name: scenarioFanoutPublish, Objects: s.bindings()}
	b.report.Results = append(b.report.Results, r)
	if err := b.setupSpread(ctx, s); err != nil {
		return err
	}
	_, err := b.measureSpread(ctx, r, s, b.cfg.repeat)
	return err
}

// publicationWait watches a publication's ConfigMap from the start of a
// convergence until its key lists every namespace.
type publicationWait struct {
	t0   time.Time
	done chan error
	at   time.Time
}

func (b *bench) startPublicationWait(ctx context.Context, pub *oriav1alpha1.Publication, n int) *publicationWait {
	w := &publicationWait{t0: time.Now(), done: make(chan error, 1)}
	go func() {
		at, err := b.waitPublished(ctx, pub, n)
		w.at = at
		w.done <- err
	}()
	return w
}

// finish extends r's convergence to the publication: the row converges
// when the ConfigMap is complete too.
func (w *publicationWait) finish(r *Result, logf func(string, ...any)) {
	if err := <-w.done; err != nil {
		r.Converged, r.Error = false, err.Error()
		return
	}
	logf("RoleBindings after %.2fs, the ConfigMap complete after %.2fs", r.Seconds, w.at.Sub(w.t0).Seconds())
	r.BindingsSeconds, r.Seconds = r.Seconds, max(r.Seconds, w.at.Sub(w.t0).Seconds())
}

// waitPublished watches the publication's ConfigMap until its key lists n
// namespaces, and returns when that event arrived. A watch, as for every
// other object the benchmark times: polling it (every 20 ms until the sixth
// session of 2026-11-23) sent the API server ~150 reads from etcd during
// oria's phase and none during the floor's.
func (b *bench) waitPublished(ctx context.Context, pub *oriav1alpha1.Publication, n int) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.timeout)
	defer cancel()
	key := client.ObjectKey{Namespace: pub.ConfigMap.Namespace, Name: pub.ConfigMap.Name}
	complete := make(chan time.Time, 1)
	check := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		if v, _, _ := unstructured.NestedString(u.Object, "data", pub.ConfigMap.KeyOrDefault()); v != "" && strings.Count(v, ",")+1 == n {
			select {
			case complete <- time.Now():
			default:
			}
		}
	}
	inf := dynamicinformer.NewFilteredDynamicInformer(b.watch.dyn, corev1.SchemeGroupVersion.WithResource("configmaps"), key.Namespace, 0, cache.Indexers{},
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", key.Name).String()
		})
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    check,
		UpdateFunc: func(_, obj any) { check(obj) },
	}); err != nil {
		return time.Time{}, err
	}
	go inf.Informer().RunWithContext(ctx)
	select {
	case at := <-complete:
		return at, nil
	case <-ctx.Done():
		return time.Time{}, fmt.Errorf("ConfigMap %s does not list the %d namespaces: %w", key, n, ctx.Err())
	}
}
