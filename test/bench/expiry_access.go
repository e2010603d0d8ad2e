package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/operator-framework/oria/internal/manager"
)

const (
	// accessSampleSize is how many of the large grant's namespaces the
	// expiry scenario asks SubjectAccessReviews about at each instant.
	accessSampleSize = 20
	// accessTimeout bounds the wait for every sampled answer to agree
	// with the gate, accessRetry is the pause between two asks.
	accessTimeout = 10 * time.Second
	accessRetry   = 10 * time.Millisecond
	// accessUser is the user asked about: a member of the template's group
	// (spreadSubjects), as a user of the grant would be.
	accessUser = "bench-expiry-user"
)

// accessChecker asks the API server, by SubjectAccessReview, whether a
// member of the grant's subjects may get ConfigMaps (the template's role)
// in a namespace: what the grant's user experiences.
type accessChecker struct {
	cs     kubernetes.Interface
	groups []string
}

// newAccessChecker returns an accessChecker on a client of its own,
// without a client-side limit.
func newAccessChecker(cfg *rest.Config, group string) (*accessChecker, error) {
	cfg = rest.CopyConfig(cfg)
	manager.SetClientRateLimit(cfg, manager.NoClientRateLimit, 0)
	cfg.UserAgent = "oria-bench-access"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &accessChecker{cs: cs, groups: []string{group, "system:authenticated"}}, nil
}

// allowed asks one SubjectAccessReview.
func (a *accessChecker) allowed(ctx context.Context, namespace string) (bool, error) {
	sar, err := a.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: accessUser, Groups: a.groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "get", Resource: "configmaps"}},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("SubjectAccessReview in %s: %w", namespace, err)
	}
	return sar.Status.Allowed, nil
}

// accessAnswers are the sampled namespaces' answers after an instant.
type accessAnswers struct {
	// agreed is when each namespace's answer was the one wanted (zero:
	// never, within the timeout).
	agreed []time.Time
	// firstAsk is how many answered as wanted when first asked.
	firstAsk int
}

// expect asks once about each of namespaces (in parallel) and returns an
// error naming those whose answer is not want.
func (a *accessChecker) expect(ctx context.Context, namespaces []string, want bool) error {
	ans, err := a.until(ctx, namespaces, want, 0)
	if err != nil {
		return err
	}
	var wrong []string
	for i, t := range ans.agreed {
		if t.IsZero() {
			wrong = append(wrong, namespaces[i])
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("access %s in %d of %d sampled namespaces (%s)", allowedWord(!want), len(wrong), len(namespaces), strings.Join(wrong, ", "))
	}
	return nil
}

// until asks about each of namespaces (in parallel) until its answer is
// want, every accessRetry for up to timeout (0: once), and returns when
// each one agreed.
func (a *accessChecker) until(ctx context.Context, namespaces []string, want bool, timeout time.Duration) (accessAnswers, error) {
	ans := accessAnswers{agreed: make([]time.Time, len(namespaces))}
	var mu sync.Mutex
	deadline := time.Now().Add(timeout)
	err := parallel(ctx, len(namespaces), len(namespaces), func(ctx context.Context, i int) error {
		for ask := 0; ; ask++ {
			got, err := a.allowed(ctx, namespaces[i])
			if err != nil {
				return err
			}
			if got == want {
				mu.Lock()
				defer mu.Unlock()
				ans.agreed[i] = time.Now()
				if ask == 0 {
					ans.firstAsk++
				}
				return nil
			}
			if !time.Now().Before(deadline) {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(accessRetry):
			}
		}
	})
	return ans, err
}

func allowedWord(allowed bool) string {
	if allowed {
		return "allowed"
	}
	return "denied"
}

// accessSample returns up to n of namespaces[from:], spread evenly over
// them, the first and the last included: the large grant's namespaces that
// no small grant binds (they bind namespaces[:from]).
func accessSample(namespaces []string, from, n int) []string {
	rest := namespaces[min(from, len(namespaces)):]
	if len(rest) <= n {
		return rest
	}
	if n == 1 {
		return rest[:1]
	}
	out := make([]string, n)
	for i := range out {
		out[i] = rest[i*(len(rest)-1)/(n-1)]
	}
	return out
}
