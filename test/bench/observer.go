package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/operator-framework/oria/internal/manager"
)

// watchClients are what observers watch with: a connection of their own
// (manager.OwnConnection), as oria's cache has, so that the floor's and the
// trigger's writes do not hold up the watch that times them (the API server
// closes a watch that falls behind, and replays what it missed).
type watchClients struct {
	md  metadata.Interface
	dyn dynamic.Interface
}

func newWatchClients(cfg *rest.Config) (watchClients, error) {
	hc, err := manager.WatchHTTPClient(cfg)
	if err != nil {
		return watchClients{}, err
	}
	md, err := metadata.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return watchClients{}, err
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return watchClients{}, err
	}
	return watchClients{md: md, dyn: dyn}, nil
}

// observer records when objects matching a label selector first appear,
// through a metadata-only informer (the watch events' arrival time); made
// by observeBy, also when they are deleted, and both per value of a label.
type observer struct {
	mu   sync.Mutex
	seen map[string]time.Time // namespace/name -> first seen
	byNS map[string]time.Time // namespace -> first object seen in it
	// added and deleted are the arrivals and the deletions seen.
	added, deleted events
	gone           map[string]time.Time // namespace/name -> deletion seen
	// group is the label whose value groups the events ("" for none).
	group   string
	changed chan struct{} // closed and replaced on every new event
}

// events are the times of one kind of watch event: the first and the last,
// and per value of the observer's group label.
type events struct {
	first, last time.Time
	byGroup     map[string][]time.Time
}

func (e *events) note(group string, now time.Time) {
	if e.first.IsZero() {
		e.first = now
	}
	e.last = now
	if group == "" {
		return
	}
	if e.byGroup == nil {
		e.byGroup = map[string][]time.Time{}
	}
	e.byGroup[group] = append(e.byGroup[group], now)
}

// observe starts an observer of the arrivals of gvr objects matching
// selector and waits for its informer to sync; it stops with ctx.
func observe(ctx context.Context, md metadata.Interface, gvr schema.GroupVersionResource, selector string) (*observer, error) {
	return startObserver(ctx, md, gvr, selector, "", false)
}

// observeBy is observe that also records deletions, and groups both by
// the value of the label group (addedIn, deletedIn).
func observeBy(ctx context.Context, md metadata.Interface, gvr schema.GroupVersionResource, selector, group string) (*observer, error) {
	return startObserver(ctx, md, gvr, selector, group, true)
}

func startObserver(ctx context.Context, md metadata.Interface, gvr schema.GroupVersionResource, selector, group string, deletions bool) (*observer, error) {
	o := newObserver()
	o.group = group
	inf := metadatainformer.NewFilteredMetadataInformer(md, gvr, metav1.NamespaceAll, 0, cache.Indexers{},
		func(opts *metav1.ListOptions) { opts.LabelSelector = selector })
	handlers := cache.ResourceEventHandlerFuncs{AddFunc: o.add}
	if deletions {
		handlers.DeleteFunc = o.delete
	}
	if _, err := inf.Informer().AddEventHandler(handlers); err != nil {
		return nil, err
	}
	go inf.Informer().RunWithContext(ctx)
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.Informer().HasSynced) {
		return nil, fmt.Errorf("watching %s (%s): not synced within 1m", gvr.Resource, selector)
	}
	return o, nil
}

func newObserver() *observer {
	return &observer{seen: map[string]time.Time{}, byNS: map[string]time.Time{}, gone: map[string]time.Time{}, changed: make(chan struct{})}
}

func (o *observer) add(obj any) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		o.recordIn(m.Namespace, m.Name, o.groupOf(m))
	}
}

func (o *observer) groupOf(m *metav1.PartialObjectMetadata) string {
	if o.group == "" {
		return ""
	}
	return m.Labels[o.group]
}

func (o *observer) delete(obj any) {
	now := time.Now()
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	key := m.Namespace + "/" + m.Name
	if _, dup := o.gone[key]; dup {
		return
	}
	o.gone[key] = now
	o.deleted.note(o.groupOf(m), now)
	o.notify()
}

// record notes that the object namespace/name is there now, unless it was
// seen before.
func (o *observer) record(namespace, name string) { o.recordIn(namespace, name, "") }

// recordIn is record for an object of group.
func (o *observer) recordIn(namespace, name, group string) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	key := namespace + "/" + name
	if _, dup := o.seen[key]; dup {
		return
	}
	o.seen[key] = now
	if _, ok := o.byNS[namespace]; !ok {
		o.byNS[namespace] = now
	}
	o.added.note(group, now)
	o.notify()
}

// notify wakes the waiters (called under the lock).
func (o *observer) notify() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// wait blocks until done (called under the lock) holds, or timeout.
func (o *observer) wait(ctx context.Context, timeout time.Duration, done func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		o.mu.Lock()
		ok, ch := done(), o.changed
		o.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitCount waits until n objects have been seen and returns when the first
// and the last of them arrived.
func (o *observer) waitCount(ctx context.Context, n int, timeout time.Duration) (first, last time.Time, err error) {
	err = o.wait(ctx, timeout, func() bool { return len(o.seen) >= n })
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("%d of %d objects after %s: %w", len(o.seen), n, timeout, err)
	}
	return o.added.first, o.added.last, nil
}

// waitDeleted waits until n objects have been seen deleted and returns
// when the first and the last of them went.
func (o *observer) waitDeleted(ctx context.Context, n int, timeout time.Duration) (first, last time.Time, err error) {
	err = o.wait(ctx, timeout, func() bool { return len(o.gone) >= n })
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("%d of %d objects deleted after %s: %w", len(o.gone), n, timeout.Round(time.Second), err)
	}
	return o.deleted.first, o.deleted.last, nil
}

// addedIn and deletedIn return the times objects of the group value
// were seen arriving, and going.
func (o *observer) addedIn(value string) []time.Time   { return o.times(&o.added, value) }
func (o *observer) deletedIn(value string) []time.Time { return o.times(&o.deleted, value) }

func (o *observer) times(e *events, value string) []time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(e.byGroup[value])
}

// waitNamespace waits for the first object in namespace ns and returns when
// it arrived.
func (o *observer) waitNamespace(ctx context.Context, ns string, timeout time.Duration) (time.Time, error) {
	err := o.wait(ctx, timeout, func() bool { _, ok := o.byNS[ns]; return ok })
	if err != nil {
		return time.Time{}, fmt.Errorf("no object in namespace %s after %s: %w", ns, timeout, err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.byNS[ns], nil
}

// timeline returns how many objects arrived in each second after t0, for
// the log: where a phase ran at full speed and where it waited.
func (o *observer) timeline(t0 time.Time) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var counts []int
	for _, at := range o.seen {
		i := max(int(at.Sub(t0)/time.Second), 0)
		for len(counts) <= i {
			counts = append(counts, 0)
		}
		counts[i]++
	}
	return fmt.Sprint(counts)
}
