package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
)

// The expiry scenario's rows (issue 32).
const (
	// scenarioExpiryWait: oria's writes while every grant waits for an
	// expiresAt an hour away (none: no polling).
	scenarioExpiryWait = "expiry-wait"
	// scenarioExpiry: the revocation latency of the grants of one
	// namespace each, from their common expiresAt to the deletion of their
	// RoleBinding.
	scenarioExpiry = "expiry"
	// scenarioExpiryLarge: the grant of many namespaces expiring with
	// them, per RoleBinding; its time runs until the last one is gone.
	scenarioExpiryLarge = "expiry-large"
	// expiryLead is how far ahead the common expiresAt is set once every
	// grant is in place: time for oria to reconcile the change and for the
	// cluster to settle before the instant.
	expiryLead = 20 * time.Second
)

// expiry is the time-bound grants scenario: G ScopeInstances binding one
// namespace each and one selecting N namespaces, all with an expiresAt an
// hour away; oria's writes are counted while they wait, then their
// expiresAt is moved to one instant a few seconds ahead, and the deletion
// of each RoleBinding is timed from that instant (watch events).
func (b *bench) expiry(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := newSpread("bench-expiry", b.cfg.expiryNamespaces, 1)
	small := make([]string, b.cfg.expiryGrants)
	for i := range small {
		small[i] = fmt.Sprintf("bench-expiry-g%04d", i)
	}
	all := append([]string{s.name}, small...)
	want := len(small) + len(s.namespaces)
	wait := &Result{Name: scenarioExpiryWait, Objects: len(all)}
	rs := &Result{Name: scenarioExpiry, Objects: len(small)}
	rl := &Result{Name: scenarioExpiryLarge, Objects: len(s.namespaces)}
	b.report.Results = append(b.report.Results, wait, rs, rl)
	if err := b.setupSpread(ctx, s); err != nil {
		return err
	}
	sel := instancesSelector(all)
	created, err := observe(ctx, b.watch.md, roleBindingsGVR, sel)
	if err != nil {
		return err
	}
	gone, err := observeDeletions(ctx, b.watch.md, roleBindingsGVR, sel)
	if err != nil {
		return err
	}

	far := metav1.NewTime(time.Now().Add(time.Hour).Truncate(time.Second))
	b.logf("expiry: creating %d grants of one namespace and one of %d namespaces, expiring at %s", len(small), len(s.namespaces), far.UTC().Format(time.RFC3339))
	if err := parallel(ctx, setupWorkers, len(all), func(ctx context.Context, i int) error {
		si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: all[i]},
			Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: s.name, ExpiresAt: &far}}
		if i == 0 {
			si.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: s.selector()}
		} else {
			si.Spec.Namespaces = []string{s.namespaces[(i-1)%len(s.namespaces)]}
		}
		return b.admin.Create(ctx, si)
	}); err != nil {
		return fmt.Errorf("creating the time-bound ScopeInstances: %w", err)
	}
	if _, _, err := created.waitCount(ctx, want, b.cfg.timeout); err != nil {
		wait.Error = err.Error()
		return nil
	}
	if err := b.settle(ctx, "before waiting for the expiry"); err != nil {
		return err
	}

	b.logf("expiry: counting oria's writes for %ds while %d grants wait for an expiry an hour away", b.cfg.expiryWaitSeconds, len(all))
	sp, err := b.begin(ctx, wait.Name)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-b.oria.Done():
		return fmt.Errorf("oria exited")
	case <-time.After(time.Duration(b.cfg.expiryWaitSeconds) * time.Second):
	}
	wait.Converged = true
	if err := b.end(ctx, sp, wait); err != nil {
		return err
	}

	at := metav1.NewTime(time.Now().Add(expiryLead).Truncate(time.Second))
	b.logf("expiry: moving every expiresAt to %s", at.UTC().Format(time.RFC3339))
	patch := fmt.Appendf(nil, `{"spec":{"expiresAt":%q}}`, at.UTC().Format(time.RFC3339))
	if err := parallel(ctx, setupWorkers, len(all), func(ctx context.Context, i int) error {
		return b.admin.Patch(ctx, &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: all[i]}}, client.RawPatch(types.MergePatchType, patch))
	}); err != nil {
		return fmt.Errorf("moving expiresAt: %w", err)
	}
	if err := b.waitQuiet(ctx, "before expiresAt"); err != nil {
		return err
	}
	if left := time.Until(at.Time); left < time.Second {
		b.warn("expiry: the cluster settled only %s before expiresAt; the latencies include what was still going on", left.Round(time.Millisecond))
	}
	sp, err = b.begin(ctx, rs.Name)
	if err != nil {
		return err
	}
	if err := gone.waitCount(ctx, want, time.Until(at.Time)+b.cfg.timeout); err != nil {
		rs.Error = err.Error()
	} else {
		b.expiryLatencies(rs, rl, gone, s.name, small, at.Time)
	}
	if err := b.waitQuiet(ctx, "after the expiry"); err != nil {
		return err
	}
	if err := b.end(ctx, sp, rs); err != nil {
		return err
	}
	return b.undoExpiry(ctx, all)
}

// expiryLatencies fills the two expiry rows from the deletions seen: each
// small grant's revocation (its RoleBinding's deletion) after at, and each
// RoleBinding of the large grant.
func (b *bench) expiryLatencies(rs, rl *Result, gone *deletions, large string, small []string, at time.Time) {
	gone.mu.Lock()
	defer gone.mu.Unlock()
	var lat []time.Duration
	for _, name := range small {
		lat = append(lat, gone.lastOf[names.LabelValue(name)].Sub(at))
	}
	rs.Latency, rs.Converged = newLatency(lat), true
	rs.Seconds, rs.FirstSeconds = percentile(lat, 100).Seconds(), percentile(lat, 0).Seconds()
	largeLat := gone.byInstance[names.LabelValue(large)]
	var d []time.Duration
	for _, t := range largeLat {
		d = append(d, t.Sub(at))
	}
	rl.Latency, rl.Converged = newLatency(d), true
	rl.Seconds, rl.FirstSeconds = percentile(d, 100).Seconds(), percentile(d, 0).Seconds()
	b.logf("expiry: %d grants revoked %s after expiresAt (p50 %s, p99 %s); the grant of %d namespaces: first RoleBinding gone after %s, last after %s",
		len(small), fmtSeconds(rs.Latency.Max), fmtSeconds(rs.Latency.P50), fmtSeconds(rs.Latency.P99), len(d), fmtSeconds(rl.FirstSeconds), fmtSeconds(rl.Seconds))
}

// undoExpiry deletes the scenario's ScopeInstances (their RoleBindings are
// gone already).
func (b *bench) undoExpiry(ctx context.Context, instances []string) error {
	return parallel(ctx, setupWorkers, len(instances), func(ctx context.Context, i int) error {
		return client.IgnoreNotFound(b.admin.Delete(ctx, &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: instances[i]}}))
	})
}

// instancesSelector selects the RoleBindings oria creates for instances.
func instancesSelector(instances []string) string {
	values := make([]string, len(instances))
	for i, name := range instances {
		values[i] = names.LabelValue(name)
	}
	return fmt.Sprintf("%s in (%s)", oriav1alpha1.LabelScopeInstance, strings.Join(values, ","))
}

// deletions records when objects matching a label selector are deleted,
// through a metadata-only informer (the watch events' arrival time), by
// the ScopeInstance label of each.
type deletions struct {
	mu         sync.Mutex
	count      int
	byInstance map[string][]time.Time // instance label -> deletion times
	lastOf     map[string]time.Time   // instance label -> last deletion
	changed    chan struct{}
}

// observeDeletions starts a deletions observer of gvr objects matching
// selector and waits for its informer to sync; it stops with ctx.
func observeDeletions(ctx context.Context, md metadata.Interface, gvr schema.GroupVersionResource, selector string) (*deletions, error) {
	d := &deletions{byInstance: map[string][]time.Time{}, lastOf: map[string]time.Time{}, changed: make(chan struct{})}
	inf := metadatainformer.NewFilteredMetadataInformer(md, gvr, metav1.NamespaceAll, 0, cache.Indexers{},
		func(opts *metav1.ListOptions) { opts.LabelSelector = selector })
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: d.deleted}); err != nil {
		return nil, err
	}
	go inf.Informer().RunWithContext(ctx)
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.Informer().HasSynced) {
		return nil, fmt.Errorf("watching %s (%s): not synced within 1m", gvr.Resource, selector)
	}
	return d, nil
}

func (d *deletions) deleted(obj any) {
	now := time.Now()
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	instance := m.Labels[oriav1alpha1.LabelScopeInstance]
	d.mu.Lock()
	defer d.mu.Unlock()
	d.count++
	d.byInstance[instance] = append(d.byInstance[instance], now)
	d.lastOf[instance] = now
	close(d.changed)
	d.changed = make(chan struct{})
}

// waitCount waits until n deletions have been seen, at most timeout.
func (d *deletions) waitCount(ctx context.Context, n int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		d.mu.Lock()
		got, ch := d.count, d.changed
		d.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%d of %d RoleBindings deleted after %s: %w", got, n, timeout.Round(time.Second), ctx.Err())
		}
	}
}
