package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/record"
)

// Dry-run modes of grant and revoke, as kubectl's --dry-run.
const (
	DryRunNone   = "none"
	DryRunClient = "client"
	DryRunServer = "server"
)

// FieldManager is the field manager of the plugin's writes (grant's
// create, revoke's patch), as managedFields record them.
const FieldManager = "kubectl-oria"

// RevokeTarget returns the object `kubectl oria revoke` names: NAME (an
// RBACPolicy), or KIND/NAME with KIND rbacpolicy or scopeinstance (plural,
// short or with the group: what -o name prints).
func RevokeTarget(s string) (client.Object, error) {
	kind, name, found := strings.Cut(s, "/")
	if !found {
		kind, name = "rbacpolicy", s
	}
	if name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("%q: want NAME (an RBACPolicy), rbacpolicy/NAME or scopeinstance/NAME", s)
	}
	switch strings.TrimSuffix(strings.ToLower(kind), "."+oriav1alpha1.GroupVersion.Group) {
	case "rbacpolicy", "rbacpolicies", "rbacp":
		return &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
	case "scopeinstance", "scopeinstances":
		return &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
	}
	return nil, fmt.Errorf("%q: revoke ends RBACPolicies and ScopeInstances, not %s", s, kind)
}

// windowOfObject is the window of an RBACPolicy or a ScopeInstance.
func windowOfObject(obj client.Object) binding.Window {
	switch o := obj.(type) {
	case *oriav1alpha1.RBACPolicy:
		return binding.PolicyWindow(o.Spec)
	case *oriav1alpha1.ScopeInstance:
		return binding.InstanceWindow(o.Spec)
	}
	return binding.Window{}
}

// kindOfObject is the kind of an RBACPolicy or a ScopeInstance.
func kindOfObject(obj client.Object) string {
	if _, ok := obj.(*oriav1alpha1.ScopeInstance); ok {
		return ownership.KindScopeInstance
	}
	return ownership.KindRBACPolicy
}

// ErrNotStarted is RevokeAt's answer for a grant whose window has not
// opened: it grants nothing yet, and an expiresAt before its notBefore is
// refused by the API server.
var ErrNotStarted = errors.New("has not started")

// RevokeAt returns the spec.expiresAt that ends a grant with window w at
// now: now in whole seconds, rounded down (never later than now). It is
// nil when the grant has already ended (already says when), and
// ErrNotStarted before its window opens. Moving expiresAt earlier, or
// adding one, only takes away: the escalation guard admits it for anyone
// who may update the object, the grant's own subject included.
func RevokeAt(w binding.Window, now time.Time) (end *metav1.Time, already string, err error) {
	switch phase, _ := w.At(now); phase {
	case binding.WindowExpired:
		return nil, describeWindow(w.Whole(), now), nil
	case binding.WindowPending:
		return nil, "", fmt.Errorf("%w (%s): it grants nothing yet, and spec.expiresAt cannot come before spec.notBefore; "+
			"delete it (--delete), or move spec.notBefore later", ErrNotStarted, describeWindow(w.Whole(), now))
	}
	return &metav1.Time{Time: now.Truncate(time.Second).UTC()}, "", nil
}

// RevokeResult is what revoke did.
type RevokeResult struct {
	// Object is the grant after the change (as the server returned it).
	Object client.Object
	// ExpiresAt is the end revoke set; nil when it changed nothing or
	// deleted.
	ExpiresAt *metav1.Time
	// Already says when a grant that had ended did ("" otherwise).
	Already string
	Deleted bool
	// Confirmed is how long oria took to report the grant Expired (its
	// bindings deleted), when revoke waited for it.
	Confirmed time.Duration
}

// RevokeOptions say how revoke ends a grant.
type RevokeOptions struct {
	// Delete deletes the object instead of ending its window.
	Delete bool
	// DryRun is none, client or server.
	DryRun string
	// Wait is how long to wait for oria to report the grant Expired; 0:
	// do not wait.
	Wait time.Duration
	// Permanent allows ending a grant that has no spec.expiresAt (a
	// standing grant rather than a break-glass one).
	Permanent bool
	// By is the requester (WhoAmI) and Reason why: the record of the
	// revocation (record.Revocation), written with the new end.
	By, Reason string
}

// Revoke ends the grant obj names (RevokeTarget) now: it sets its
// spec.expiresAt to now, with the record of who revoked it, when and why,
// keeping the object as the record of the grant, or deletes it
// (opts.Delete); then, unless opts.Wait is 0 or it is a dry run, waits
// until oria reports it Expired. A grant with no spec.expiresAt is ended
// only with opts.Permanent. An instance compiled from an RBACPolicy is
// ended through its policy.
func Revoke(ctx context.Context, c client.Client, obj client.Object, opts RevokeOptions) (*RevokeResult, error) {
	kind := kindOfObject(obj)
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return nil, fmt.Errorf("reading %s %q: %w", kind, obj.GetName(), err)
	}
	if policy := ownership.ControllerName(obj.GetOwnerReferences(), ownership.KindRBACPolicy); policy != "" {
		return nil, fmt.Errorf("ScopeInstance %q is compiled from RBACPolicy %q, which oria keeps it in line with: revoke the policy (kubectl oria revoke %s)",
			obj.GetName(), policy, policy)
	}
	res := &RevokeResult{Object: obj}
	if opts.Delete {
		res.Deleted = true
		if opts.DryRun == DryRunClient {
			return res, nil
		}
		var dopts []client.DeleteOption
		if opts.DryRun == DryRunServer {
			dopts = append(dopts, client.DryRunAll)
		}
		if err := c.Delete(ctx, obj, dopts...); err != nil {
			return nil, fmt.Errorf("deleting %s %q: %w", kind, obj.GetName(), err)
		}
		return res, nil
	}
	w := windowOfObject(obj)
	end, already, err := RevokeAt(w, time.Now())
	if err != nil {
		return nil, fmt.Errorf("%s %q %w", kind, obj.GetName(), err)
	}
	if end == nil {
		res.Already = already
		return res, nil
	}
	if w.ExpiresAt == nil && !opts.Permanent {
		return nil, answerNo("%s %q is a standing grant (no spec.expiresAt), not a time-bound one: revoke ends it for good only with --permanent (or --delete); nothing changed",
			kind, obj.GetName())
	}
	res.ExpiresAt = end
	rec := record.Record{By: opts.By, At: record.Now(end.Time), Reason: opts.Reason}
	if opts.DryRun == DryRunClient {
		setExpiresAt(obj, end)
		obj.SetAnnotations(record.Revocation.Set(obj.GetAnnotations(), rec))
		return res, nil
	}
	patch, err := revokePatch(end, rec)
	if err != nil {
		return nil, err
	}
	popts := []client.PatchOption{client.FieldOwner(FieldManager)}
	if opts.DryRun == DryRunServer {
		popts = append(popts, client.DryRunAll)
	}
	if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch), popts...); err != nil {
		return nil, fmt.Errorf("setting spec.expiresAt of %s %q: %w", kind, obj.GetName(), err)
	}
	if opts.DryRun == DryRunServer || opts.Wait <= 0 {
		return res, nil
	}
	res.Confirmed, err = waitExpired(ctx, c, obj, opts.Wait)
	return res, err
}

// revokePatch is the merge patch that ends a grant at end with the record
// rec, written whole (a reason left out removes an earlier one).
func revokePatch(end *metav1.Time, rec record.Record) ([]byte, error) {
	annotations := map[string]*string{}
	for key, v := range map[string]string{record.Revocation.By: rec.By, record.Revocation.At: rec.At, record.Revocation.Reason: rec.Reason} {
		if v != "" {
			annotations[key] = &v
		} else {
			annotations[key] = nil
		}
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": annotations},
		"spec":     map[string]any{"expiresAt": end.UTC().Format(time.RFC3339)},
	})
	if err != nil {
		return nil, fmt.Errorf("encoding the revocation: %w", err)
	}
	return patch, nil
}

func setExpiresAt(obj client.Object, end *metav1.Time) {
	switch o := obj.(type) {
	case *oriav1alpha1.RBACPolicy:
		o.Spec.ExpiresAt = end
	case *oriav1alpha1.ScopeInstance:
		o.Spec.ExpiresAt = end
	}
}

// revokePoll is how often revoke reads the grant while it waits.
const revokePoll = 100 * time.Millisecond

// waitExpired waits up to timeout until oria reports obj (as patched, at
// its generation) Expired: its bindings deleted. It returns how long that
// took.
func waitExpired(ctx context.Context, c client.Client, obj client.Object, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	gen := obj.GetGeneration()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err == nil && expiredAt(obj, gen) {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%s %q ends at its new spec.expiresAt, but oria did not report it Expired within %v: is oria running? (kubectl oria check)",
				kindOfObject(obj), obj.GetName(), timeout)
		case <-time.After(revokePoll):
		}
	}
}

// expiredAt reports whether obj's status, for generation gen or later,
// says Expired.
func expiredAt(obj client.Object, gen int64) bool {
	var observed int64
	var conds []metav1.Condition
	switch o := obj.(type) {
	case *oriav1alpha1.RBACPolicy:
		observed, conds = o.Status.ObservedGeneration, o.Status.Conditions
	case *oriav1alpha1.ScopeInstance:
		observed, conds = o.Status.ObservedGeneration, o.Status.Conditions
	}
	c := meta.FindStatusCondition(conds, oriav1alpha1.TypeReady)
	return observed >= gen && c != nil && c.Reason == oriav1alpha1.ReasonExpired
}
