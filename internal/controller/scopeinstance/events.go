package scopeinstance

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/reconciler"
	"github.com/operator-framework/oria/internal/status"
)

// Event reasons.
const (
	EventBindingsCreated  = "BindingsCreated"
	EventBindingsUpdated  = "BindingsUpdated"
	EventBindingsReplaced = "BindingsReplaced"
	EventBindingsDeleted  = "BindingsDeleted"
	EventConflict         = "Conflict"
)

// The Events of a reconcile: the bindings written and deleted, counted
// (recordEvents), a conflict found, and those of time-bound grants
// (AccessGranted, AccessExpiring, AccessExpired): what each reconcile owes,
// recorded once per window (recordWindow).

var _ reconciler.Reporter[*oriav1alpha1.ScopeInstance, *plan, result] = (*Reconciler)(nil)

// Report records what Write did (reconciler.Reporter), before the status is
// computed: the binding latency of the namespaces it bound (measured to
// when their bindings were written), or its end without a measurement when
// the instance does not bind; then the Events: a gate that could not be
// created, its conflict; a gate emptied at the expiry, the window's Event;
// writes that ran to their end, the bindings created, updated, replaced and
// deleted, the conflicts, and the window's Event, which, outside the
// window, stands for the deletions. Writes that stopped on an error record
// no Event.
func (r *Reconciler) Report(ctx context.Context, si *oriav1alpha1.ScopeInstance, p *plan, res result) {
	if p.action == bindAll {
		r.latency.Bound(si.Name, res.ensured, res.boundAt)
	} else {
		r.latency.Abandon(si.Name)
	}
	switch {
	case res.gateless:
		r.recordEvents(si, nil, nil, res.conflicts(p))
	case res.emptied != "":
		r.recordWindow(ctx, si, p, res)
	case !res.done:
	case p.action == bindAll:
		r.recordEvents(si, res.written, res.deleted, res.conflicts(p))
		r.recordWindow(ctx, si, p, res)
	case p.action == revokeAll:
		if !r.recordWindow(ctx, si, p, res) {
			r.recordEvents(si, nil, res.deleted, nil)
		}
	case p.action == revokeOnly:
		r.recordEvents(si, nil, res.deleted, nil)
	}
}

// recordEvents emits one Event per kind of change with counts (naming the
// first namespaces), never one per namespace.
func (r *Reconciler) recordEvents(si *oriav1alpha1.ScopeInstance, written, deleted engine.SetOutcome, conflicts []string) {
	for _, e := range []struct {
		action   engine.Action
		reason   string
		verb     string
		past     string
		outcomes engine.SetOutcome
	}{
		{engine.Created, EventBindingsCreated, "Create", "created", written},
		{engine.Updated, EventBindingsUpdated, "Update", "updated", written},
		{engine.Replaced, EventBindingsReplaced, "Replace", "replaced (roleRef changed)", written},
		{engine.Deleted, EventBindingsDeleted, "Delete", "deleted", deleted},
	} {
		if d := describeChanges(e.action, e.outcomes); d != "" {
			r.Recorder.Eventf(si, nil, corev1.EventTypeNormal, e.reason, e.verb, "%s %s", e.past, d)
		}
	}
	// A conflict is news when the instance was not already reporting it;
	// every retry would otherwise repeat the warning.
	if prev := meta.FindStatusCondition(si.Status.Conditions, oriav1alpha1.TypeReady); len(conflicts) > 0 && (prev == nil || prev.Reason != oriav1alpha1.ReasonConflict) {
		r.Recorder.Eventf(si, nil, corev1.EventTypeWarning, EventConflict, "Create", "%s; left unchanged", status.Enumerate(conflicts, 5))
	}
}

// describeChanges counts the bindings of each kind whose outcome is
// action, naming the namespaces of a namespaced kind (the first few): two
// changes in different namespaces are two events, not one counted twice.
// It is "" when there are none.
func describeChanges(action engine.Action, outcomes engine.SetOutcome) string {
	var parts []string
	for _, k := range outcomes {
		n, nss := 0, map[string]bool{}
		for _, o := range k.Outcomes {
			if o.Action == action {
				n++
				nss[o.Namespace] = true
			}
		}
		switch {
		case n == 0:
		case k.Namespaced:
			names := slices.Sorted(maps.Keys(nss))
			parts = append(parts, fmt.Sprintf("%d %s(s) in %d namespace(s): %s", n, k.Kind, len(nss), status.Enumerate(names, 5)))
		default:
			parts = append(parts, fmt.Sprintf("%d %s(s)", n, k.Kind))
		}
	}
	return strings.Join(parts, " and ")
}

// windowEvent returns the reason of the Event a reconcile of a time-bound
// instance owes ("" for none), given the window, where now lies in it, the
// Ready condition before this reconcile, the expiry warning and how many
// bindings it deleted: AccessGranted when the window is open and was not
// (no condition yet, Pending or Expired); AccessExpiring while less than
// the warning is left; AccessExpired when it has just expired (a grant that
// never granted anything, created expired, owes none). It is pure; the
// caller records each once per window (windowMemo).
func windowEvent(w binding.Window, phase binding.Phase, now time.Time, prev *metav1.Condition, lead time.Duration, deleted int) string {
	if !w.Bounded() {
		return ""
	}
	switch phase {
	case binding.WindowPending:
		return ""
	case binding.WindowExpired:
		if (prev == nil && deleted == 0) || (prev != nil && prev.Reason == oriav1alpha1.ReasonExpired) {
			return ""
		}
		return EventAccessExpired
	}
	if prev == nil || prev.Reason == oriav1alpha1.ReasonPending || prev.Reason == oriav1alpha1.ReasonExpired {
		return EventAccessGranted
	}
	if w.ExpiresAt != nil && lead > 0 && w.ExpiresAt.Sub(now) <= lead {
		return EventAccessExpiring
	}
	return ""
}

// recordWindow records the Event windowEvent decides, once per window (a
// reconcile that reads a cache not showing the last status yet would see
// the same transition again), on the instance and on the RBACPolicy it is
// compiled from. It reports whether it recorded one.
func (r *Reconciler) recordWindow(ctx context.Context, si *oriav1alpha1.ScopeInstance, p *plan, res result) bool {
	if !p.window.Bounded() {
		return false
	}
	prev := meta.FindStatusCondition(si.Status.Conditions, oriav1alpha1.TypeReady)
	reason := windowEvent(p.window, p.phase, p.now, prev, r.opts.ExpiryWarning, res.revoked+left(p, res))
	key := windowKey(p.window)
	if reason == "" || !r.windowEvents.first(si, reason, key) {
		return false
	}
	who := r.subjectsOf(ctx, si, p)
	var note string
	switch reason {
	case EventAccessGranted:
		if w := p.window.Describe(p.now); w != "" {
			note = fmt.Sprintf("access granted to %s %s", who, w)
		} else {
			note = fmt.Sprintf("access granted to %s, with no end", who)
		}
		// The grant's own Event says how long is left: no warning right
		// after it.
		if e := p.window.ExpiresAt; e != nil && r.opts.ExpiryWarning > 0 && e.Sub(p.now) <= r.opts.ExpiryWarning {
			r.windowEvents.first(si, EventAccessExpiring, key)
		}
	case EventAccessExpiring:
		note = fmt.Sprintf("access of %s expires at %s (in %s)", who, binding.Stamp(p.window.ExpiresAt), binding.Left(p.window.ExpiresAt.Sub(p.now)))
	case EventAccessExpired:
		note = fmt.Sprintf("access of %s %s: %d binding(s) deleted", who, p.window.Describe(p.now), res.revoked)
		if res.emptied != "" {
			note = fmt.Sprintf("access of %s %s: ClusterRole %q, the grant's gate, emptied; its %d binding(s) are deleted next", who,
				p.window.Describe(p.now), res.emptied, left(p, res))
		}
	}
	r.Recorder.Eventf(si, nil, corev1.EventTypeNormal, reason, "Expire", "%s", note)
	if policy := compiledFrom(si); policy != nil {
		r.Recorder.Eventf(policy, nil, corev1.EventTypeNormal, reason, "Expire", "%s", note)
	}
	return true
}

// left counts the bindings of a gate emptied at the expiry (res.emptied),
// deleted by the next reconcile: the plan's revoke.
func left(p *plan, res result) int {
	if res.emptied == "" {
		return 0
	}
	return p.revoke.Len()
}

// windowKey identifies a window, so that a moved bound is a new window.
func windowKey(w binding.Window) string {
	var b strings.Builder
	for _, t := range []*metav1.Time{w.NotBefore, w.ExpiresAt} {
		if t != nil {
			b.WriteString(t.UTC().Format(time.RFC3339Nano))
		}
		b.WriteByte('/')
	}
	return b.String()
}

// subjectsOf names the subjects of the instance's template, for an Event.
func (r *Reconciler) subjectsOf(ctx context.Context, si *oriav1alpha1.ScopeInstance, p *plan) string {
	t := p.template
	if t == nil {
		t = &oriav1alpha1.ScopeTemplate{}
		if err := r.Client.Get(ctx, types.NamespacedName{Name: si.Spec.ScopeTemplateName}, t); err != nil {
			return fmt.Sprintf("the subjects of ScopeTemplate %q", si.Spec.ScopeTemplateName)
		}
	}
	return describeSubjects(t.Spec.BindingTemplate.Subjects)
}

// describeSubjects names subjects as "User alice, Group devs,
// ServiceAccount ci/bot" (the first ten).
func describeSubjects(subj []rbacv1.Subject) string {
	out := make([]string, len(subj))
	for i, s := range subj {
		name := s.Name
		if s.Namespace != "" {
			name = s.Namespace + "/" + s.Name
		}
		out[i] = s.Kind + " " + name
	}
	if len(out) == 0 {
		return "no subject"
	}
	return status.Enumerate(out, 10)
}

// compiledFrom returns the RBACPolicy an instance is compiled from (its
// controller reference), as an object to record Events on; nil for an
// instance of its own.
func compiledFrom(si *oriav1alpha1.ScopeInstance) *oriav1alpha1.RBACPolicy {
	ref := metav1.GetControllerOfNoCopy(si)
	if ref == nil || ref.Kind != ownership.KindRBACPolicy || ref.APIVersion != oriav1alpha1.GroupVersion.String() {
		return nil
	}
	return &oriav1alpha1.RBACPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: ref.APIVersion, Kind: ref.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: ref.Name, UID: ref.UID},
	}
}

// windowMemo remembers, per instance, the windows each window Event was
// recorded for; the zero value is ready to use. An instance's entry goes
// with the instance (forget).
type windowMemo struct {
	mu   sync.Mutex
	seen map[string]windowSeen
}

type windowSeen struct {
	uid  types.UID
	keys map[string]string // Event reason -> window key
}

// first records that reason was owed for the window key of si, and reports
// whether it was the first time.
func (m *windowMemo) first(si *oriav1alpha1.ScopeInstance, reason, key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen == nil {
		m.seen = map[string]windowSeen{}
	}
	s, ok := m.seen[si.Name]
	if !ok || s.uid != si.UID {
		s = windowSeen{uid: si.UID, keys: map[string]string{}}
		m.seen[si.Name] = s
	}
	if s.keys[reason] == key {
		return false
	}
	s.keys[reason] = key
	return true
}

// forget drops what is remembered of the named instance.
func (m *windowMemo) forget(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.seen, name)
}
