package main

import (
	"fmt"
	"time"
)

// Targets of issues 6, 9, 12, 21 and 32 (see docs/benchmarks.md).
const (
	// targetRatio bounds convergence over the floor without a client-side
	// limit: oria, with its default flags, against a plain parallel client.
	targetRatio     = 1.25
	minFloorSeconds = 1.0 // the ratio targets apply from this floor up
	// targetReads bounds the extensions row's GETs: a new ClusterRole needs
	// no read before its create.
	targetReads = 10
	// targetP99 is the new-namespace latency at N >= targetP99Namespaces.
	targetP99           = 100 * time.Millisecond
	targetP99Namespaces = 2000
	// targetRSSBytes is oria's peak RSS at the memory size: E x C CRDs and
	// N namespaces.
	targetRSSBytes   = 150 << 20
	memoryExtensions = 200
	memoryCRDs       = 5
	memoryNamespaces = 5000
	targetRSSLabel   = "peak RSS at 200x5 CRDs + 5,000 namespaces"
	// targetScaleRSSBytes is oria's peak RSS in the scale row from
	// scaleObjects RoleBindings up.
	targetScaleRSSBytes = 200 << 20
	scaleObjects        = 50000
	// targetPublishRatio bounds the fan-out with a publication over the
	// fan-out without one (issue 12).
	targetPublishRatio = 1.1
	// targetGuardP99 is the escalation guard's admission latency (issue
	// 21): a delegated user's write of a ScopeInstance listing at least
	// guardTargetNamespaces namespaces, and of an RBACPolicy over a
	// namespace selector, over at least guardTargetWrites writes.
	targetGuardP99        = 100 * time.Millisecond
	guardTargetNamespaces = 100
	guardTargetWrites     = 50
	// targetExpiryP99 is the latency of time-bound grants (issue 32):
	// p99 of at least expiryTargetGrants grants bound at their common
	// notBefore, and revoked at their common expiresAt; and the start and
	// the end of the access of one gated grant of at least
	// expiryTargetNamespaces namespaces (the 1,000) at the same
	// instants (largeTarget).
	targetExpiryP99        = time.Second
	expiryTargetGrants     = 100
	expiryTargetNamespaces = 1000
)

// Target is one pass/fail line. Pass is nil when the target does not apply
// to this run's sizes or was not measured.
type Target struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Pass *bool  `json:"pass"`
}

func (t Target) verdict() string {
	switch {
	case t.Pass == nil:
		return "n/a"
	case *t.Pass:
		return "PASS"
	default:
		return "FAIL"
	}
}

func (r *Report) result(name string) *Result {
	for _, x := range r.Results {
		if x.Name == name {
			return x
		}
	}
	return nil
}

// evaluate computes the targets from the results.
func (r *Report) evaluate() {
	r.Targets = nil
	add := func(name, want, got string, pass *bool) {
		r.Targets = append(r.Targets, Target{Name: name, Want: want, Got: got, Pass: pass})
	}
	for _, name := range []string{scenarioExtensions, scenarioFanout, scenarioFanoutPublish, scenarioScale} {
		if x := r.result(name); x != nil {
			got, pass := ratioTarget(x)
			add(name+" convergence / floor (no client limit)", fmt.Sprintf("<= %.2f", targetRatio), got, pass)
		}
	}
	if x, f := r.result(scenarioFanoutPublish), r.result(scenarioFanout); x != nil {
		got, pass := publishTarget(x, f)
		add("fanout-publish convergence / fanout convergence", fmt.Sprintf("<= %.2f", targetPublishRatio), got, pass)
		got, pass = publishOverhead(x)
		add("fanout-publish: ConfigMap complete / RoleBindings (same run)", fmt.Sprintf("<= %.2f", targetPublishRatio), got, pass)
	}
	if x := r.result(scenarioExtensions); x != nil {
		got, pass := fmt.Sprint(x.Reads), ptr(x.Reads <= targetReads)
		if !x.Converged {
			got, pass = "did not converge", ptr(false)
		}
		add("extensions reads (GET)", fmt.Sprintf("<= %d", targetReads), got, pass)
	}
	if x := r.result(scenarioNewNamespaces); x != nil {
		label, want := fmt.Sprintf("new-namespace p99 (N=%d)", r.Config.Namespaces), "< "+fmtSeconds(targetP99.Seconds())
		switch {
		case !x.Converged || x.Latency == nil:
			add(label, want, "did not converge", ptr(false))
		default:
			var pass *bool
			if r.Config.Namespaces >= targetP99Namespaces {
				pass = ptr(x.Latency.P99 < targetP99.Seconds())
			}
			add(label, want, fmtSeconds(x.Latency.P99), pass)
		}
	}
	for _, g := range []struct{ row, label string }{
		{scenarioGuardInstance, fmt.Sprintf("guard: ScopeInstance over %d namespaces, p99 of %d writes", r.Config.GuardNamespaces, r.Config.GuardWrites)},
		{scenarioGuardPolicy, fmt.Sprintf("guard: RBACPolicy over a namespace selector, p99 of %d writes", r.Config.GuardWrites)},
	} {
		if x := r.result(g.row); x != nil {
			got, pass := guardTarget(x, r.result(g.row+guardOffSuffix), g.row == scenarioGuardInstance, r.Config)
			add(g.label, "< "+fmtSeconds(targetGuardP99.Seconds()), got, pass)
		}
	}
	r.evaluateExpiry(add)
	r.evaluateAtSize(add)
	if x := r.result(scenarioIdle); x != nil {
		got := fmt.Sprintf("%d", x.WritesTotal)
		if !x.Converged {
			got = "not measured"
		}
		add(fmt.Sprintf("idle writes (%ds)", r.Config.IdleSeconds), "0", got, ptr(x.Converged && x.WritesTotal == 0))
	}
	if r.result(scenarioExtensions) != nil || r.result(scenarioFanout) != nil {
		var pass *bool
		if r.Config.Extensions >= memoryExtensions && r.Config.CRDsPerExtension >= memoryCRDs &&
			r.Config.Namespaces >= memoryNamespaces && r.result(scenarioExtensions) != nil && r.result(scenarioFanout) != nil {
			pass = ptr(r.PeakRSS < targetRSSBytes)
		}
		add(targetRSSLabel, "< "+fmtMB(targetRSSBytes), fmtMB(r.PeakRSS), pass)
	}
	if x := r.result(scenarioScale); x != nil {
		var pass *bool
		// A regression line at the default size; from twice that, the
		// shipped memory limit decides (evaluateAtSize).
		if x.Converged && x.Objects >= scaleObjects && x.Objects < 2*scaleObjects {
			pass = ptr(x.PeakRSS < targetScaleRSSBytes)
		}
		add(fmt.Sprintf("scale peak RSS (%d RoleBindings)", x.Objects), "< "+fmtMB(targetScaleRSSBytes), fmtMB(x.PeakRSS), pass)
	}
}

// ratioTarget evaluates a row's convergence against its floor without a
// client-side limit.
func ratioTarget(x *Result) (string, *bool) {
	switch {
	case !x.Converged:
		return "did not converge", ptr(false)
	case x.Ratio() == 0:
		return "no floor", nil
	case x.FloorSeconds < minFloorSeconds:
		// A floor this short measures latency (watch delivery, a
		// reconcile's start), not throughput: -quick sizes.
		return fmt.Sprintf("%.2f (floor < %.0fs)", x.Ratio(), minFloorSeconds), nil
	default:
		return fmt.Sprintf("%.2f", x.Ratio()), ptr(x.Ratio() <= targetRatio)
	}
}

// publishTarget evaluates the fan-out with a publication against the
// fan-out without one (f, nil when it did not run).
func publishTarget(x, f *Result) (string, *bool) {
	switch {
	case !x.Converged:
		return "did not converge", ptr(false)
	case f == nil || !f.Converged || f.Seconds == 0:
		return "no fanout row", nil
	case f.FloorSeconds > 0 && f.FloorSeconds < minFloorSeconds:
		return fmt.Sprintf("%.2f (floor < %.0fs)", x.Seconds/f.Seconds, minFloorSeconds), nil
	default:
		return fmt.Sprintf("%.2f", x.Seconds/f.Seconds), ptr(x.Seconds/f.Seconds <= targetPublishRatio)
	}
}

// publishOverhead is the publication's own cost within the fanout-publish
// row: immune to the noise between two rows on a shared machine.
func publishOverhead(x *Result) (string, *bool) {
	switch {
	case !x.Converged || x.BindingsSeconds == 0:
		return "not measured", nil
	case x.FloorSeconds > 0 && x.FloorSeconds < minFloorSeconds:
		return fmt.Sprintf("%.2f (floor < %.0fs)", x.Seconds/x.BindingsSeconds, minFloorSeconds), nil
	default:
		return fmt.Sprintf("%.2f", x.Seconds/x.BindingsSeconds), ptr(x.Seconds/x.BindingsSeconds <= targetPublishRatio)
	}
}

// guardTarget evaluates the guard's p99 (x, the guard on) and shows the
// same writes' p99 with the guard off (off, nil when not measured). The
// target applies from guardTargetWrites writes up, and for the
// ScopeInstance (instance) from guardTargetNamespaces namespaces up.
func guardTarget(x, off *Result, instance bool, c Sizes) (string, *bool) {
	switch {
	case x.Error != "":
		return "a write failed (see below)", ptr(false)
	case !x.Converged || x.Latency == nil || x.Latency.Count == 0:
		return "did not finish", ptr(false)
	}
	got := fmtSeconds(x.Latency.P99)
	if off != nil && off.Converged && off.Latency != nil && off.Latency.Count > 0 {
		got += " (guard off " + fmtSeconds(off.Latency.P99) + ")"
	}
	if x.Latency.Count < guardTargetWrites || (instance && c.GuardNamespaces < guardTargetNamespaces) {
		return got, nil
	}
	return got, ptr(x.Latency.P99 < targetGuardP99.Seconds())
}

// failedTargets counts the targets that apply and failed.
func (r *Report) failedTargets() int {
	n := 0
	for _, t := range r.Targets {
		if t.Pass != nil && !*t.Pass {
			n++
		}
	}
	return n
}

// converged reports whether every scenario converged.
func (r *Report) converged() bool {
	for _, x := range r.Results {
		if !x.Converged {
			return false
		}
	}
	return true
}

// evaluateExpiry adds the expiry scenario's targets: no write while the
// grants wait; the small grants bound and revoked within targetExpiryP99
// of notBefore and expiresAt (p99); the large grant's access started and
// ended within targetExpiryP99 of them (largeTarget).
func (r *Report) evaluateExpiry(add func(name, want, got string, pass *bool)) {
	c := r.Config
	if x := r.result(scenarioExpiryWait); x != nil {
		got := fmt.Sprint(x.WritesTotal)
		if !x.Converged {
			got = "not measured"
		}
		add(fmt.Sprintf("expiry-wait writes (%ds, %d grants expiring in 1h)", c.ExpiryWaitSeconds, c.ExpiryGrants+1), "0", got, ptr(x.Converged && x.WritesTotal == 0))
	}
	want := "< " + fmtSeconds(targetExpiryP99.Seconds())
	for _, e := range []struct {
		row, label string
		large      bool
		applies    bool
	}{
		{scenarioNotBefore, fmt.Sprintf("notbefore: first RoleBinding after notBefore, p99 of %d grants", c.ExpiryGrants), false, c.ExpiryGrants >= expiryTargetGrants},
		{scenarioNotBeforeLarge, fmt.Sprintf("notbefore-large: access starts after notBefore, one gated grant of %d namespaces", c.ExpiryNamespaces), true, c.ExpiryNamespaces >= expiryTargetNamespaces},
		{scenarioExpiry, fmt.Sprintf("expiry: revocation after expiresAt, p99 of %d grants", c.ExpiryGrants), false, c.ExpiryGrants >= expiryTargetGrants},
		{scenarioExpiryLarge, fmt.Sprintf("expiry-large: access ends after expiresAt, one gated grant of %d namespaces", c.ExpiryNamespaces), true, c.ExpiryNamespaces >= expiryTargetNamespaces},
	} {
		x := r.result(e.row)
		var got string
		var pass *bool
		switch {
		case x == nil:
			continue
		case e.large && (!x.Converged || x.Gate == nil):
			got, pass = "not measured", ptr(false)
		case e.large:
			got, pass = largeTarget(x, e.row == scenarioNotBeforeLarge)
		case !x.Converged || x.Latency == nil || x.Latency.Count == 0:
			got, pass = "not measured", ptr(false)
		default:
			got, pass = fmtSeconds(x.Latency.P99), ptr(x.Latency.P99 < targetExpiryP99.Seconds())
		}
		if !e.applies && got != "not measured" {
			pass = nil
		}
		add(e.label, want, got, pass)
	}
}

// largeTarget evaluates the gated grant's row: when a watch saw its gate
// change (x.Seconds), and when the last of the sampled namespaces'
// SubjectAccessReviews agreed (x.Latency.Max), both after the instant and
// within targetExpiryP99. Its bindings (made while it was pending, cleaned
// up after expiresAt) are shown, not judged.
func largeTarget(x *Result, opening bool) (string, *bool) {
	verb := "emptied"
	if opening {
		verb = "filled"
	}
	got, pass := fmt.Sprintf("gate %s %s", verb, fmtSeconds(x.Seconds)), x.Seconds < targetExpiryP99.Seconds()
	if l := x.Latency; l != nil && l.Count > 0 {
		got += fmt.Sprintf(", SubjectAccessReviews %s (%d namespaces) %s", allowedWord(opening), l.Count, fmtSeconds(l.Max))
		pass = pass && l.Max < targetExpiryP99.Seconds()
	} else {
		got += ", no SubjectAccessReview"
	}
	got += "; " + bindingsNote(x.Gate, opening)
	return got, ptr(pass)
}
