package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
)

// DefaultWait is how long grant waits for Bound and revoke for Expired.
const DefaultWait = 30 * time.Second

// waitFlag is --wait of grant and revoke: a duration, or true (DefaultWait)
// or false (0: do not wait).
type waitFlag struct{ d *time.Duration }

func (w waitFlag) String() string { return w.d.String() }
func (w waitFlag) Type() string   { return "duration" }
func (w waitFlag) Set(s string) error {
	if b, err := strconv.ParseBool(s); err == nil {
		*w.d = 0
		if b {
			*w.d = DefaultWait
		}
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("want a duration (30s, 2m), true or false")
	}
	*w.d = d
	return nil
}

// Outcomes of a grant once oria has reported on it.
const (
	// GrantBound: everything asked is granted (Ready=True, Bound).
	GrantBound = "Bound"
	// GrantPartial: some of it is granted (bound somewhere), Ready says
	// what is not.
	GrantPartial = "Partial"
	// GrantNothing: oria reports it grants nothing.
	GrantNothing = "Nothing"
)

// grantOutcome returns the outcome of p as oria reported it for generation
// gen; "" while oria has not settled (no report for gen yet, or
// Progressing).
func grantOutcome(p *oriav1alpha1.RBACPolicy, gen int64) string {
	c := meta.FindStatusCondition(p.Status.Conditions, oriav1alpha1.TypeReady)
	switch {
	case c == nil || p.Status.ObservedGeneration < gen || c.ObservedGeneration < gen || c.Reason == oriav1alpha1.ReasonProgressing:
		return ""
	case c.Status == metav1.ConditionTrue:
		return GrantBound
	case p.Status.Scope != "" && (p.Status.Scope == oriav1alpha1.ScopeCluster || p.Status.BoundNamespaceCount > 0):
		return GrantPartial
	}
	return GrantNothing
}

// WaitGranted waits up to timeout until oria reports p (as created, at its
// generation) Bound, or settles otherwise, re-reading p into itself. It
// returns the outcome and how long it took; an error when oria did not
// report in time.
func WaitGranted(ctx context.Context, c client.Client, p *oriav1alpha1.RBACPolicy, timeout time.Duration) (string, time.Duration, error) {
	start := time.Now()
	gen := p.Generation
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err == nil {
			if out := grantOutcome(p, gen); out != "" {
				return out, time.Since(start), nil
			}
		}
		select {
		case <-ctx.Done():
			why := "is oria running? (kubectl oria check)"
			if cond := meta.FindStatusCondition(p.Status.Conditions, oriav1alpha1.TypeReady); cond != nil {
				why = fmt.Sprintf("it says %s: %s", cond.Reason, cond.Message)
			}
			return "", 0, fmt.Errorf("RBACPolicy %q was created, but oria did not report it Bound within %v: %s; see kubectl oria status %s, or end it: kubectl oria revoke %s",
				p.Name, timeout, why, p.Spec.ExtensionName, p.Name)
		case <-time.After(revokePoll):
		}
	}
}

// grantedSummary says what oria reports p grants, for the line grant
// prints once it is Bound (or in part): the level, the APIs, to whom,
// where and until when; the APIs of leftOut are not among those granted.
func grantedSummary(p *oriav1alpha1.RBACPolicy, now time.Time, leftOut []string) string {
	var apis []string
	for _, api := range p.Status.APIs {
		if !slices.Contains(leftOut, api) {
			apis = append(apis, api)
		}
	}
	return fmt.Sprintf("%s on %s for %s %s, %s", p.Spec.Access, strings.Join(apis, ", "), strings.Join(subjectStrings(p.Spec.Subjects), ", "),
		where(p.Status.Scope, p.Status.BoundNamespaces, p.Status.BoundNamespaceCount), windowOf(binding.PolicyWindow(p.Spec), now))
}
