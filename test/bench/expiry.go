package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
)

// The expiry scenario's rows (issue 32).
const (
	// scenarioNotBefore: the grants of one namespace each, pending until
	// their common notBefore, from that instant to each one's RoleBinding.
	scenarioNotBefore = "notbefore"
	// scenarioNotBeforeLarge: the grant of many namespaces bound at the
	// same instant, per RoleBinding; its time runs until the last one,
	// against the floor creating as many.
	scenarioNotBeforeLarge = "notbefore-large"
	// scenarioExpiryWait: oria's writes while every grant waits for an
	// expiresAt an hour away (none: no polling).
	scenarioExpiryWait = "expiry-wait"
	// scenarioExpiry: the revocation latency of the grants of one
	// namespace each, from their common expiresAt to the deletion of their
	// RoleBinding.
	scenarioExpiry = "expiry"
	// scenarioExpiryLarge: the grant of many namespaces expiring with
	// them, per RoleBinding; its time runs until the last one is gone,
	// against the floor deleting as many.
	scenarioExpiryLarge = "expiry-large"
	// expiryLead is how far ahead the common notBefore, then the common
	// expiresAt, is set once every grant is in place: time for oria to
	// reconcile the change and for the cluster to settle before the
	// instant.
	expiryLead = 20 * time.Second
)

// expiry is the time-bound grants scenario: G ScopeInstances binding one
// namespace each and one selecting N namespaces, created pending (a
// notBefore half an hour away, an expiresAt an hour away). Their notBefore
// is moved to one instant a few seconds ahead and the creation of each
// RoleBinding is timed from that instant; oria's writes are counted while
// they wait for the far expiry; then their expiresAt is moved to one
// instant a few seconds ahead, and the deletion of each RoleBinding is
// timed from that instant (watch events). The floors (expiryFloors) create
// and delete the large grant's RoleBindings first.
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
	ns := &Result{Name: scenarioNotBefore, Objects: len(small)}
	nl := &Result{Name: scenarioNotBeforeLarge, Objects: len(s.namespaces)}
	wait := &Result{Name: scenarioExpiryWait, Objects: len(all)}
	rs := &Result{Name: scenarioExpiry, Objects: len(small)}
	rl := &Result{Name: scenarioExpiryLarge, Objects: len(s.namespaces)}
	b.report.Results = append(b.report.Results, ns, nl, wait, rs, rl)
	if err := b.setupSpread(ctx, s); err != nil {
		return err
	}
	if err := b.expiryFloors(ctx, s, nl, rl); err != nil {
		return err
	}
	obs, err := observeBy(ctx, b.watch.md, roleBindingsGVR, instancesSelector(all), oriav1alpha1.LabelScopeInstance)
	if err != nil {
		return err
	}

	now := time.Now()
	pending, far := metav1.NewTime(now.Add(30*time.Minute).Truncate(time.Second)), metav1.NewTime(now.Add(time.Hour).Truncate(time.Second))
	b.logf("expiry: creating %d grants of one namespace and one of %d namespaces, pending until %s, expiring at %s", len(small), len(s.namespaces),
		pending.UTC().Format(time.RFC3339), far.UTC().Format(time.RFC3339))
	if err := parallel(ctx, setupWorkers, len(all), func(ctx context.Context, i int) error {
		si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: all[i]},
			Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: s.name, NotBefore: &pending, ExpiresAt: &far}}
		if i == 0 {
			si.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: s.selector()}
		} else {
			si.Spec.Namespaces = []string{s.namespaces[(i-1)%len(s.namespaces)]}
		}
		return b.admin.Create(ctx, si)
	}); err != nil {
		return fmt.Errorf("creating the time-bound ScopeInstances: %w", err)
	}
	if err := b.settle(ctx, "before notBefore"); err != nil {
		return err
	}
	if err = b.atInstant(ctx, ns, all, "notBefore", func() error {
		if _, _, err := obs.waitCount(ctx, want, expiryLead+b.cfg.timeout); err != nil {
			return fmt.Errorf("RoleBindings after notBefore: %w", err)
		}
		return nil
	}, func(at time.Time) {
		grantLatencies(ns, nl, obs.addedIn, s.name, small, at)
		b.logf("notbefore: %d grants bound %s after notBefore (p50 %s, p99 %s); the grant of %d namespaces: first RoleBinding after %s, last after %s (floor %s)",
			len(small), fmtSeconds(ns.Latency.Max), fmtSeconds(ns.Latency.P50), fmtSeconds(ns.Latency.P99), nl.Objects,
			fmtSeconds(nl.FirstSeconds), fmtSeconds(nl.Seconds), fmtSeconds(nl.FloorSeconds))
	}); err != nil {
		return err
	}
	if ns.Latency == nil {
		return b.undoExpiry(ctx, all) // without the bindings, nothing is left to expire
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

	if err := b.atInstant(ctx, rs, all, "expiresAt", func() error {
		_, _, err := obs.waitDeleted(ctx, want, expiryLead+b.cfg.timeout)
		return err
	}, func(at time.Time) {
		grantLatencies(rs, rl, obs.deletedIn, s.name, small, at)
		b.logf("expiry: %d grants revoked %s after expiresAt (p50 %s, p99 %s); the grant of %d namespaces: first RoleBinding gone after %s, last after %s (floor %s)",
			len(small), fmtSeconds(rs.Latency.Max), fmtSeconds(rs.Latency.P50), fmtSeconds(rs.Latency.P99), rl.Objects,
			fmtSeconds(rl.FirstSeconds), fmtSeconds(rl.Seconds), fmtSeconds(rl.FloorSeconds))
	}); err != nil {
		return err
	}
	return b.undoExpiry(ctx, all)
}

// atInstant moves the field (notBefore or expiresAt) of every instance to
// one instant expiryLead ahead, lets the cluster settle, then measures r:
// its writes and CPU from before the instant until oria is quiet again,
// after done returned (nil: what r waits for is there); latencies then
// fills the rows from the instant. A failed wait is r's error (not
// converged), not the run's.
func (b *bench) atInstant(ctx context.Context, r *Result, instances []string, field string, done func() error, latencies func(at time.Time)) error {
	at := metav1.NewTime(time.Now().Add(expiryLead).Truncate(time.Second))
	b.logf("%s: moving every %s to %s", r.Name, field, at.UTC().Format(time.RFC3339))
	patch := fmt.Appendf(nil, `{"spec":{%q:%q}}`, field, at.UTC().Format(time.RFC3339))
	if err := parallel(ctx, setupWorkers, len(instances), func(ctx context.Context, i int) error {
		return b.admin.Patch(ctx, &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: instances[i]}}, client.RawPatch(types.MergePatchType, patch))
	}); err != nil {
		return fmt.Errorf("moving %s: %w", field, err)
	}
	if err := b.waitQuiet(ctx, "before "+field); err != nil {
		return err
	}
	if left := time.Until(at.Time); left < time.Second {
		b.warn("%s: the cluster settled only %s before %s; the latencies include what was still going on", r.Name, left.Round(time.Millisecond), field)
	}
	sp, err := b.begin(ctx, r.Name)
	if err != nil {
		return err
	}
	if err := done(); err != nil {
		r.Error = err.Error()
	} else {
		latencies(at.Time)
	}
	if err := b.waitQuiet(ctx, "after "+field); err != nil {
		return err
	}
	return b.end(ctx, sp, r)
}

// grantLatencies fills the rows of one instant from times(label value),
// the times a watch saw the RoleBindings of an instance arrive or go: rs,
// each small grant's first after at; rl, each RoleBinding of the large
// grant after at. A RoleBinding seen before the instant is an error of the
// row.
func grantLatencies(rs, rl *Result, times func(string) []time.Time, large string, small []string, at time.Time) {
	var lat []time.Duration
	for _, name := range small {
		t := times(names.LabelValue(name))
		if len(t) > 0 {
			lat = append(lat, slices.MinFunc(t, time.Time.Compare).Sub(at))
		}
	}
	var d []time.Duration
	for _, t := range times(names.LabelValue(large)) {
		d = append(d, t.Sub(at))
	}
	for _, x := range []struct {
		r   *Result
		lat []time.Duration
	}{{rs, lat}, {rl, d}} {
		x.r.Latency, x.r.Converged = newLatency(x.lat), true
		x.r.Seconds, x.r.FirstSeconds = percentile(x.lat, 100).Seconds(), percentile(x.lat, 0).Seconds()
		if x.r.FirstSeconds < 0 {
			x.r.Converged, x.r.Error = false, fmt.Sprintf("a RoleBinding was seen %s before the instant", fmtSeconds(-x.r.FirstSeconds))
		}
	}
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
