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
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/names"
)

// The expiry scenario's rows (issue 32).
const (
	// scenarioNotBefore: the grants of one namespace each (not gated),
	// pending until their common notBefore, from that instant to each
	// one's RoleBinding.
	scenarioNotBefore = "notbefore"
	// scenarioNotBeforeLarge: the gated grant of many namespaces, from
	// notBefore until a watch saw its gate filled (access starts in every
	// namespace), checked by SubjectAccessReviews.
	scenarioNotBeforeLarge = "notbefore-large"
	// scenarioExpiryWait: oria's writes while every grant waits for an
	// expiresAt an hour away (none: no polling).
	scenarioExpiryWait = "expiry-wait"
	// scenarioExpiry: the revocation latency of the grants of one
	// namespace each, from their common expiresAt to the deletion of their
	// RoleBinding.
	scenarioExpiry = "expiry"
	// scenarioExpiryLarge: the gated grant expiring with them, from
	// expiresAt until a watch saw its gate emptied or deleted (access
	// ends), checked by SubjectAccessReviews.
	scenarioExpiryLarge = "expiry-large"
	// expiryLead is how far ahead the common notBefore, then the common
	// expiresAt, is set once every grant is in place: time for oria to
	// reconcile the change and for the cluster to settle before the
	// instant.
	expiryLead = 20 * time.Second
)

// expiry is the time-bound grants scenario: G ScopeInstances binding one
// namespace each and one selecting N namespaces, created pending (a
// notBefore half an hour away, an expiresAt an hour away). The large one
// is gated (expiry_gate.go): its RoleBindings to its gate are made while
// it is pending. Their notBefore is moved to one instant a few seconds
// ahead: the creation of each small grant's RoleBinding, and the large
// grant's gate filled, are timed from that instant (watch events), the
// large grant's access confirmed by SubjectAccessReviews; oria's writes
// are counted while they wait for the far expiry; then their expiresAt is
// moved to one instant a few seconds ahead, and the deletion of each small
// grant's RoleBinding, and the gate emptied, are timed from that instant.
// The floors (expiryFloors) create and delete the large grant's
// RoleBindings first: context for its bindings' figures.
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
	nl := &Result{Name: scenarioNotBeforeLarge, Objects: len(s.namespaces), Gate: &GateFigures{}}
	wait := &Result{Name: scenarioExpiryWait, Objects: len(all)}
	rs := &Result{Name: scenarioExpiry, Objects: len(small)}
	rl := &Result{Name: scenarioExpiryLarge, Objects: len(s.namespaces), Gate: &GateFigures{}}
	b.report.Results = append(b.report.Results, ns, nl, wait, rs, rl)
	if err := b.setupSpread(ctx, s); err != nil {
		return err
	}
	if err := b.expiryFloors(ctx, s, nl.Gate, rl.Gate); err != nil {
		return err
	}
	obs, err := observeBy(ctx, b.watch.md, roleBindingsGVR, instancesSelector(all), oriav1alpha1.LabelScopeInstance)
	if err != nil {
		return err
	}

	created := time.Now()
	pending, far := metav1.NewTime(created.Add(30*time.Minute).Truncate(time.Second)), metav1.NewTime(created.Add(time.Hour).Truncate(time.Second))
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
		if gated := binding.Gated(si.Spec); gated != (i == 0) {
			return fmt.Errorf("ScopeInstance %s: gated %t, want %t", si.Name, gated, i == 0)
		}
		return b.admin.Create(ctx, si)
	}); err != nil {
		return fmt.Errorf("creating the time-bound ScopeInstances: %w", err)
	}
	if err := b.settle(ctx, "before notBefore"); err != nil {
		return err
	}
	// A gated grant binds its gate while it is pending.
	g, err := b.findGate(ctx, s.name, s.namespaces, len(small))
	if err != nil {
		return err
	}
	// The large grant's bindings, all made while it was pending.
	if t := obs.addedIn(names.LabelValue(s.name)); len(t) > 0 {
		last := slices.MaxFunc(t, time.Time.Compare)
		b.logf("notbefore-large: the %d RoleBindings to the gate made while pending, the last %s after the grants' creation (create floor %s)",
			len(t), fmtSeconds(last.Sub(created).Seconds()), fmtSeconds(nl.Gate.FloorSeconds))
	}

	if err = b.atInstant(ctx, ns, nl, all, "notBefore", g, func(at time.Time) error {
		if _, _, err := obs.waitCount(ctx, want, expiryLead+b.cfg.timeout); err != nil {
			return fmt.Errorf("RoleBindings after notBefore: %w", err)
		}
		smallLatencies(ns, obs.addedIn, small, at)
		nl.Gate.BindingsSeconds = lastSince(obs.addedIn(names.LabelValue(s.name)), at)
		b.logf("notbefore: %d grants bound %s after notBefore (p50 %s, p99 %s); the gated grant of %d namespaces: %s",
			len(small), fmtSeconds(ns.Latency.Max), fmtSeconds(ns.Latency.P50), fmtSeconds(ns.Latency.P99), nl.Objects, gateSummary(nl, true))
		return nil
	}); err != nil {
		return err
	}
	if ns.Latency == nil {
		return b.undoExpiry(ctx, all) // without the bindings, nothing is left to expire
	}
	if err := b.checkNotGated(ctx, small, s.role); err != nil {
		return err
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

	if err := b.atInstant(ctx, rs, rl, all, "expiresAt", g, func(at time.Time) error {
		if _, _, err := obs.waitDeleted(ctx, want, expiryLead+b.cfg.timeout); err != nil {
			return err
		}
		smallLatencies(rs, obs.deletedIn, small, at)
		rl.Gate.BindingsSeconds = lastSince(obs.deletedIn(names.LabelValue(s.name)), at)
		if gone, err := g.watch.wait(ctx, b.cfg.timeout, gateAbsent); err != nil {
			b.warn("expiry-large: %v", err)
		} else {
			rl.Gate.GateGoneSeconds = gone.Sub(at).Seconds()
		}
		b.logf("expiry: %d grants revoked %s after expiresAt (p50 %s, p99 %s); the gated grant of %d namespaces: %s",
			len(small), fmtSeconds(rs.Latency.Max), fmtSeconds(rs.Latency.P50), fmtSeconds(rs.Latency.P99), rl.Objects, gateSummary(rl, false))
		return nil
	}); err != nil {
		return err
	}
	return b.undoExpiry(ctx, all)
}

// atInstant moves the field (notBefore or expiresAt) of every instance to
// one instant expiryLead ahead and lets the cluster settle; it checks the
// large grant g as it must be until then (large's error otherwise), then
// measures r: its writes and CPU (the large grant's included) from before
// the instant until oria is quiet again. At the instant, it waits for g's
// gate to change and fills large (g.measure), then runs done, which waits
// for the rest and fills the small grants' row; an error of done is r's
// (not converged), not the run's.
func (b *bench) atInstant(ctx context.Context, r, large *Result, instances []string, field string, g *largeGrant, done func(at time.Time) error) error {
	at := metav1.NewTime(time.Now().Add(expiryLead).Truncate(time.Second))
	opening := field == "notBefore"
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
	err := g.before(ctx, opening)
	if left := time.Until(at.Time); left < time.Second {
		b.warn("%s: the cluster settled only %s before %s; the latencies include what was still going on", r.Name, left.Round(time.Millisecond), field)
	}
	sp, spErr := b.begin(ctx, r.Name)
	if spErr != nil {
		return spErr
	}
	if err != nil {
		large.Error = err.Error()
	} else {
		g.measure(ctx, large, at.Time, opening, expiryLead+b.cfg.timeout)
	}
	if err := done(at.Time); err != nil {
		r.Error = err.Error()
	}
	if err := b.waitQuiet(ctx, "after "+field); err != nil {
		return err
	}
	return b.end(ctx, sp, r)
}

// smallLatencies fills r from times(label value), the times a watch saw
// the RoleBindings of an instance arrive or go: each small grant's first
// after at. A RoleBinding seen before the instant is an error of the row.
func smallLatencies(r *Result, times func(string) []time.Time, small []string, at time.Time) {
	var lat []time.Duration
	for _, name := range small {
		t := times(names.LabelValue(name))
		if len(t) > 0 {
			lat = append(lat, slices.MinFunc(t, time.Time.Compare).Sub(at))
		}
	}
	r.Latency, r.Converged = newLatency(lat), true
	r.Seconds, r.FirstSeconds = percentile(lat, 100).Seconds(), percentile(lat, 0).Seconds()
	if r.FirstSeconds < 0 {
		r.Converged, r.Error = false, fmt.Sprintf("a RoleBinding was seen %s before the instant", fmtSeconds(-r.FirstSeconds))
	}
}

// lastSince returns the last of times after at, in seconds (negative:
// before it), 0 without any.
func lastSince(times []time.Time, at time.Time) float64 {
	if len(times) == 0 {
		return 0
	}
	return slices.MaxFunc(times, time.Time.Compare).Sub(at).Seconds()
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
