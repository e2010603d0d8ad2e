package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/ownership"
)

// The expiry scenario's large grant is gated (binding.Gated: a time-bound
// namespace selector, no ServiceAccount): its RoleBindings, made while it
// is pending, bind its gate, one ClusterRole oria fills at notBefore and
// empties at expiresAt. Its access starts and ends with that one write, in
// every namespace at once; the bindings are made before notBefore, and
// deleted after expiresAt, at the API server's pace.

// GateFigures are the large grant's figures besides the row's Seconds
// (when a watch saw its gate filled, or emptied or deleted, after the
// instant) and Latency (each sampled namespace's SubjectAccessReview
// answering as the gate, after the instant).
type GateFigures struct {
	// Gate is the gate's name.
	Gate string `json:"gate"`
	// AccessSampled are the namespaces asked about by SubjectAccessReview;
	// AccessFirstAsk how many of them answered as the gate when first
	// asked, right after the watch saw the gate change.
	AccessSampled  int `json:"accessSampled"`
	AccessFirstAsk int `json:"accessFirstAsk"`
	// BindingsSeconds is when the last of the grant's RoleBindings was
	// seen created (notbefore: before the instant, negative) or deleted
	// (expiry), from the instant: information, not the target.
	BindingsSeconds float64 `json:"bindingsSeconds"`
	// GateGoneSeconds (expiry) is when the gate was seen deleted, after
	// the bindings.
	GateGoneSeconds float64 `json:"gateGoneSeconds,omitempty"`
	// FloorSeconds and FloorControlPlaneCPUSeconds are the floor creating,
	// or deleting, as many RoleBindings (expiry_floor.go): context for
	// BindingsSeconds.
	FloorSeconds                float64 `json:"floorSeconds,omitempty"`
	FloorControlPlaneCPUSeconds float64 `json:"floorControlPlaneCPUSeconds,omitempty"`
}

// largeGrant is the gated grant under watch.
type largeGrant struct {
	name   string // the ScopeInstance
	gate   string
	watch  *gateWatch
	access *accessChecker
	sample []string // namespaces asked about
}

// findGate checks that the grant large is gated, its gate there and empty
// before notBefore, and each of its RoleBindings (one in each of
// namespaces) bound to it; then it starts watching the gate. Anything else
// is the scenario's error: the rows would not measure a gated grant.
func (b *bench) findGate(ctx context.Context, large string, namespaces []string, smallGrants int) (*largeGrant, error) {
	si := &oriav1alpha1.ScopeInstance{}
	if err := b.admin.Get(ctx, client.ObjectKey{Name: large}, si); err != nil {
		return nil, fmt.Errorf("reading the large grant %s: %w", large, err)
	}
	if !binding.Gated(si.Spec) {
		return nil, fmt.Errorf("the large grant %s is not gated (binding.Gated): its access would start and end binding by binding", large)
	}
	g := &largeGrant{name: large, gate: binding.GateName(si.Name, string(si.UID))}
	gate := &rbacv1.ClusterRole{}
	if err := b.admin.Get(ctx, client.ObjectKey{Name: g.gate}, gate); err != nil {
		return nil, fmt.Errorf("the gate of the large grant %s, ClusterRole %s, was not found before notBefore: %w", large, g.gate, err)
	}
	switch {
	case !ownership.ControlledByUID(gate, si.UID):
		return nil, fmt.Errorf("ClusterRole %s, the gate of %s, is not controlled by it", g.gate, large)
	case ownership.GateGrants(gate):
		return nil, fmt.Errorf("ClusterRole %s, the gate of %s, holds %d rules before notBefore", g.gate, large, len(gate.Rules))
	}
	rbs := &rbacv1.RoleBindingList{}
	if err := b.admin.List(ctx, rbs, client.MatchingLabels{oriav1alpha1.LabelScopeInstance: names.LabelValue(large)}); err != nil {
		return nil, fmt.Errorf("listing the RoleBindings of %s: %w", large, err)
	}
	if err := boundTo(rbs.Items, "ClusterRole", g.gate, len(namespaces)); err != nil {
		return nil, fmt.Errorf("the large grant %s before notBefore: %w", large, err)
	}
	var err error
	if g.watch, err = watchGate(ctx, b.watch.dyn, g.gate); err != nil {
		return nil, err
	}
	if s := g.watch.state(); s != gateEmpty {
		return nil, fmt.Errorf("the watch shows the gate %s %s before notBefore", g.gate, s)
	}
	if g.access, err = newAccessChecker(b.restConfig, spreadSubjects[0].Name); err != nil {
		return nil, err
	}
	// The small grants bind the same subjects in namespaces[:smallGrants].
	if g.sample = accessSample(namespaces, smallGrants, accessSampleSize); len(g.sample) == 0 {
		b.warn("expiry: every namespace of the large grant is also a small grant's (-expiry-namespaces <= -expiry-grants): its access is not checked by SubjectAccessReview")
	}
	b.logf("expiry: the large grant binds its gate %s in %d namespaces; access checked in %d of them", g.gate, len(namespaces), len(g.sample))
	return g, nil
}

// boundTo returns an error unless rbs are n RoleBindings, each bound to
// the role kind/name.
func boundTo(rbs []rbacv1.RoleBinding, kind, name string, n int) error {
	for _, rb := range rbs {
		if rb.RoleRef.Kind != kind || rb.RoleRef.Name != name {
			return fmt.Errorf("RoleBinding %s/%s binds %s %s, not %s %s", rb.Namespace, rb.Name, rb.RoleRef.Kind, rb.RoleRef.Name, kind, name)
		}
	}
	if len(rbs) != n {
		return fmt.Errorf("%d RoleBindings to %s %s, want %d", len(rbs), kind, name, n)
	}
	return nil
}

// checkNotGated checks that the small grants, once bound, bind the
// template's role, not a gate: one RoleBinding each.
func (b *bench) checkNotGated(ctx context.Context, small []string, role string) error {
	for _, name := range small {
		rbs := &rbacv1.RoleBindingList{}
		if err := b.admin.List(ctx, rbs, client.MatchingLabels{oriav1alpha1.LabelScopeInstance: names.LabelValue(name)}); err != nil {
			return fmt.Errorf("listing the RoleBindings of %s: %w", name, err)
		}
		if err := boundTo(rbs.Items, "ClusterRole", role, 1); err != nil {
			return fmt.Errorf("the small grant %s is not bound as an ungated one: %w", name, err)
		}
	}
	return nil
}

// before checks, before an instant, that the gate is as it must be until
// then, empty (opening: notBefore) or filled, and that the sampled
// namespaces' access agrees.
func (g *largeGrant) before(ctx context.Context, opening bool) error {
	want := gateEmpty
	if !opening {
		want = gateFilled
	}
	if s := g.watch.state(); s != want {
		return fmt.Errorf("the gate is %s before the instant, not %s", s, want)
	}
	if err := g.access.expect(ctx, g.sample, !opening); err != nil {
		return fmt.Errorf("before the instant: %w", err)
	}
	return nil
}

// measure fills r, the large grant's row, from the instant at: when the
// watch saw the gate filled (opening) or emptied or deleted, then, asked
// right away, when each sampled namespace's access agreed. A gate changed
// before the instant, or an answer that did not agree within
// accessTimeout, is r's error.
func (g *largeGrant) measure(ctx context.Context, r *Result, at time.Time, opening bool, timeout time.Duration) {
	want := []gateState{gateEmpty, gateAbsent}
	if opening {
		want = []gateState{gateFilled}
	}
	seen, err := g.watch.wait(ctx, timeout, want...)
	if err != nil {
		r.Error = err.Error()
		return
	}
	ans, err := g.access.until(ctx, g.sample, opening, accessTimeout)
	r.Seconds = seen.Sub(at).Seconds()
	r.Gate.AccessSampled, r.Gate.AccessFirstAsk = len(g.sample), ans.firstAsk
	r.Latency, r.Converged = newLatency(sinceInstant(ans.agreed, at)), true
	switch late := slices.Index(ans.agreed, time.Time{}); {
	case err != nil:
		r.Converged, r.Error = false, err.Error()
	case r.Seconds < 0:
		r.Converged, r.Error = false, fmt.Sprintf("the gate was seen %v %s before the instant", want[0], fmtSeconds(-r.Seconds))
	case late >= 0:
		r.Converged, r.Error = false, fmt.Sprintf("access still %s in %s %s after the gate changed", allowedWord(!opening), g.sample[late], accessTimeout)
	}
}

// sinceInstant returns each time after at (a zero time: not counted).
func sinceInstant(times []time.Time, at time.Time) []time.Duration {
	var d []time.Duration
	for _, t := range times {
		if !t.IsZero() {
			d = append(d, t.Sub(at))
		}
	}
	return d
}

// gateSummary describes the large grant's row r at notBefore (opening) or
// expiresAt, for the log.
func gateSummary(r *Result, opening bool) string {
	if !r.Converged || r.Gate == nil {
		return "not measured: " + r.Error
	}
	got, _ := largeTarget(r, opening)
	if r.Gate.GateGoneSeconds > 0 {
		got += ", gate deleted after " + fmtSeconds(r.Gate.GateGoneSeconds)
	}
	return fmt.Sprintf("%s (%d of the sampled namespaces at the first ask)", got, r.Gate.AccessFirstAsk)
}

// bindingsNote describes the large grant's bindings: made while pending
// (opening), or cleaned up after the instant, and the floor.
func bindingsNote(g *GateFigures, opening bool) string {
	floor := ""
	if g.FloorSeconds > 0 {
		floor = " (floor " + fmtSeconds(g.FloorSeconds) + ")"
	}
	switch {
	case opening && g.BindingsSeconds <= 0:
		return fmt.Sprintf("bindings made while pending, the last %s before%s", fmtSeconds(-g.BindingsSeconds), floor)
	case opening:
		return fmt.Sprintf("the last binding made %s after%s", fmtSeconds(g.BindingsSeconds), floor)
	default:
		return fmt.Sprintf("bindings cleaned up after %s%s", fmtSeconds(g.BindingsSeconds), floor)
	}
}
