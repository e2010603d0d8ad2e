package eligibility

import (
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/record"
)

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func eligiblePolicy() *oriav1alpha1.RBACPolicy {
	return &oriav1alpha1.RBACPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "devs-edit"},
		Spec: oriav1alpha1.RBACPolicySpec{
			ExtensionName: "argocd", Access: oriav1alpha1.AccessEdit,
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "devs"}},
			Namespaces: []string{"team-a"},
			Eligibility: &oriav1alpha1.Eligibility{MaxDuration: metav1.Duration{Duration: time.Hour},
				Approvers: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "leads"}}, RequireReason: true},
		},
	}
}

func request() *oriav1alpha1.AccessRequest {
	return &oriav1alpha1.AccessRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "r1", CreationTimestamp: metav1.Time{Time: t0}},
		Spec: oriav1alpha1.AccessRequestSpec{PolicyName: "devs-edit", Requester: "alice",
			EligibleAs: &rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "devs"},
			Namespaces: []string{"team-a"}, Duration: metav1.Duration{Duration: 10 * time.Minute}, Reason: "INC-1"},
	}
}

var (
	alice = User{Name: "alice", Groups: []string{"devs", "leads"}}
	bob   = User{Name: "bob", Groups: []string{"leads"}}
	carol = User{Name: "carol", Groups: []string{"ops"}}
)

func TestAdmitCreate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(p *oriav1alpha1.RBACPolicy, r *oriav1alpha1.AccessRequest)
		user   User
		refuse string // a part of the refusal; "" admits
	}{
		{name: "eligible through a group", user: alice},
		{name: "another requester named", user: bob, refuse: `spec.requester says "alice", but the request is made by "bob"`},
		{name: "not in the group", user: User{Name: "alice"}, refuse: `user "alice" is not Group`},
		{name: "group not listed", user: alice, edit: func(_ *oriav1alpha1.RBACPolicy, r *oriav1alpha1.AccessRequest) {
			r.Spec.EligibleAs = &rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "leads"}
		}, refuse: `is not eligible for RBACPolicy "devs-edit"`},
		{name: "as herself, not listed", user: alice, edit: func(_ *oriav1alpha1.RBACPolicy, r *oriav1alpha1.AccessRequest) { r.Spec.EligibleAs = nil },
			refuse: `does not list User "alice"`},
		{name: "as herself, listed", user: alice, edit: func(p *oriav1alpha1.RBACPolicy, r *oriav1alpha1.AccessRequest) {
			r.Spec.EligibleAs = nil
			p.Spec.Subjects = append(p.Spec.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, Name: "alice"})
		}},
		{name: "over the maximum", user: alice, edit: func(_ *oriav1alpha1.RBACPolicy, r *oriav1alpha1.AccessRequest) {
			r.Spec.Duration.Duration = 61 * time.Minute
		},
			refuse: "more than RBACPolicy"},
		{name: "zero", user: alice, edit: func(_ *oriav1alpha1.RBACPolicy, r *oriav1alpha1.AccessRequest) { r.Spec.Duration.Duration = 0 }, refuse: "more than zero"},
		{name: "negative", user: alice, edit: func(_ *oriav1alpha1.RBACPolicy, r *oriav1alpha1.AccessRequest) {
			r.Spec.Duration.Duration = -time.Second
		}, refuse: "more than zero"},
		{name: "namespace outside", user: alice, edit: func(_ *oriav1alpha1.RBACPolicy, r *oriav1alpha1.AccessRequest) {
			r.Spec.Namespaces = []string{"team-a", "team-b"}
		}, refuse: `spec.namespaces team-b: RBACPolicy "devs-edit" grants only in team-a`},
		{name: "no reason", user: alice, edit: func(_ *oriav1alpha1.RBACPolicy, r *oriav1alpha1.AccessRequest) { r.Spec.Reason = "" }, refuse: "spec.reason is required"},
		{name: "self-activation needs a reason", user: alice, edit: func(p *oriav1alpha1.RBACPolicy, r *oriav1alpha1.AccessRequest) {
			r.Spec.Reason, p.Spec.Eligibility.RequireReason, p.Spec.Eligibility.Approvers = "", false, nil
		}, refuse: "has no approvers"},
		{name: "policy not eligible", user: alice, edit: func(p *oriav1alpha1.RBACPolicy, _ *oriav1alpha1.AccessRequest) { p.Spec.Eligibility = nil }, refuse: "makes no one eligible"},
		{name: "created approved", user: alice, edit: func(_ *oriav1alpha1.RBACPolicy, r *oriav1alpha1.AccessRequest) {
			r.Annotations = Approval.Set(nil, record.Record{By: "bob", At: record.Now(t0)})
		}, refuse: "a request is created undecided"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, r := eligiblePolicy(), request()
			if tc.edit != nil {
				tc.edit(p, r)
			}
			check(t, AdmitCreate(p, r, tc.user), tc.refuse)
		})
	}
	check(t, AdmitCreate(nil, request(), alice), `RBACPolicy "devs-edit" does not exist`)
}

func check(t *testing.T, problems []string, refuse string) {
	t.Helper()
	got := strings.Join(problems, "; ")
	if refuse == "" && got != "" {
		t.Fatalf("refused: %s", got)
	}
	if refuse != "" && !strings.Contains(got, refuse) {
		t.Fatalf("want a refusal with %q, got %q", refuse, got)
	}
}

func decided(r *oriav1alpha1.AccessRequest, k record.Keys, by string, at time.Time, reason string) *oriav1alpha1.AccessRequest {
	r = r.DeepCopy()
	r.Annotations = k.Set(r.Annotations, record.Record{By: by, At: record.Now(at), Reason: reason})
	return r
}

func TestAdmitUpdate(t *testing.T) {
	now := t0.Add(time.Minute)
	pending := request()
	approved := decided(pending, Approval, "bob", now, "")
	for _, tc := range []struct {
		name     string
		old, new *oriav1alpha1.AccessRequest
		user     User
		admin    bool
		at       time.Time
		refuse   string
	}{
		{name: "an approver approves", old: pending, new: approved, user: bob},
		{name: "self-approval, even in leads", old: pending, new: decided(pending, Approval, "alice", now, ""), user: alice, refuse: "two persons"},
		{name: "not an approver", old: pending, new: decided(pending, Approval, "carol", now, ""), user: carol, refuse: `user "carol" is not an approver`},
		{name: "approval in someone else's name", old: pending, new: approved, user: carol, refuse: `says "bob", but the request is made by "carol"`},
		{name: "approval at another time", old: pending, new: decided(pending, Approval, "bob", now.Add(-time.Hour), ""), user: bob, refuse: "at most 5m0s apart"},
		{name: "approval after the timeout", old: pending, new: decided(pending, Approval, "bob", t0.Add(2*time.Hour), ""), user: bob, at: t0.Add(2 * time.Hour),
			refuse: "is Expired, not waiting"},
		{name: "approving a denied request", old: decided(pending, Denial, "bob", now, "no"), new: decided(decided(pending, Denial, "bob", now, "no"), Approval, "dave", now, ""),
			user: User{Name: "dave", Groups: []string{"leads"}}, refuse: "is Denied, not waiting"},
		{name: "deny without a reason", old: pending, new: decided(pending, Denial, "bob", now, ""), user: bob, refuse: "a denial says why"},
		{name: "the approval changed", old: approved, new: decided(pending, Approval, "dave", now, ""), user: User{Name: "dave", Groups: []string{"leads"}},
			refuse: "is on record"},
		{name: "the approval removed", old: approved, new: pending, user: bob, refuse: "is on record"},
		{name: "the spec edited", old: pending, new: func() *oriav1alpha1.AccessRequest {
			r := pending.DeepCopy()
			r.Spec.Duration.Duration = time.Hour
			return r
		}(), user: alice, refuse: "immutable"},
		{name: "the requester cancels", old: pending, new: decided(pending, End, "alice", now, ""), user: alice},
		{name: "the requester ends early", old: approved, new: decided(approved, End, "alice", now, ""), user: alice},
		{name: "carol may not end", old: approved, new: decided(approved, End, "carol", now, ""), user: carol, refuse: "may not end"},
		{name: "an admin may end", old: approved, new: decided(approved, End, "carol", now, ""), user: carol, admin: true},
		{name: "a label is no decision", old: pending, new: func() *oriav1alpha1.AccessRequest {
			r := pending.DeepCopy()
			r.Labels = map[string]string{"team": "a"}
			return r
		}(), user: carol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at := tc.at
			if at.IsZero() {
				at = now
			}
			check(t, AdmitUpdate(eligiblePolicy(), tc.old, tc.new, tc.user, tc.admin, at), tc.refuse)
		})
	}
}

func TestAssess(t *testing.T) {
	approvedAt := t0.Add(time.Minute)
	approved := decided(request(), Approval, "bob", approvedAt, "ok")
	noEligibility := eligiblePolicy()
	noEligibility.Spec.Eligibility = nil
	narrowed := eligiblePolicy()
	narrowed.Spec.Namespaces = []string{"team-b"}
	selfPolicy := eligiblePolicy()
	selfPolicy.Spec.Eligibility.Approvers = nil
	for _, tc := range []struct {
		name   string
		r      *oriav1alpha1.AccessRequest
		p      *oriav1alpha1.RBACPolicy
		at     time.Time
		state  oriav1alpha1.RequestState
		by     string
		ns     []string
		endsAt time.Time
	}{
		{name: "pending", r: request(), p: eligiblePolicy(), at: t0.Add(time.Minute), state: oriav1alpha1.StateRequested},
		{name: "pending too long", r: request(), p: eligiblePolicy(), at: t0.Add(time.Hour), state: oriav1alpha1.StateExpired, by: ByOria},
		{name: "pending, policy gone", r: request(), at: t0, state: oriav1alpha1.StateCancelled, by: ByOria},
		{name: "approved", r: approved, p: eligiblePolicy(), at: approvedAt, state: oriav1alpha1.StateActive, ns: []string{"team-a"}, endsAt: approvedAt.Add(10 * time.Minute)},
		{name: "approved, time up", r: approved, p: eligiblePolicy(), at: approvedAt.Add(10 * time.Minute), state: oriav1alpha1.StateEnded, by: ByOria},
		{name: "approved, policy gone", r: approved, at: approvedAt.Add(time.Minute), state: oriav1alpha1.StateEnded, by: ByOria},
		{name: "approved, eligibility removed", r: approved, p: noEligibility, at: approvedAt, state: oriav1alpha1.StateEnded, by: ByOria},
		{name: "approved, namespaces narrowed", r: approved, p: narrowed, at: approvedAt, state: oriav1alpha1.StateEnded, by: ByOria},
		{name: "approved, ended early", r: decided(approved, End, "alice", approvedAt, ""), p: eligiblePolicy(), at: approvedAt, state: oriav1alpha1.StateEnded, by: "alice"},
		{name: "cancelled", r: decided(request(), End, "alice", t0, ""), p: eligiblePolicy(), at: t0, state: oriav1alpha1.StateCancelled, by: "alice"},
		{name: "denied", r: decided(request(), Denial, "bob", t0, "no"), p: eligiblePolicy(), at: t0, state: oriav1alpha1.StateDenied},
		{name: "self-activated", r: request(), p: selfPolicy, at: t0, state: oriav1alpha1.StateActive, ns: []string{"team-a"}, endsAt: t0.Add(10 * time.Minute)},
		{name: "a final state is kept", r: func() *oriav1alpha1.AccessRequest {
			r := approved.DeepCopy()
			r.Status.State, r.Status.EndedBy = oriav1alpha1.StateExpired, ByOria
			return r
		}(), p: eligiblePolicy(), at: approvedAt, state: oriav1alpha1.StateExpired, by: ByOria},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Assess(tc.r, tc.p, tc.at)
			if v.State != tc.state || v.EndedBy != tc.by || strings.Join(v.Namespaces, ",") != strings.Join(tc.ns, ",") {
				t.Fatalf("got state %s, ended by %q, namespaces %v (%s); want %s, %q, %v", v.State, v.EndedBy, v.Namespaces, v.Message, tc.state, tc.by, tc.ns)
			}
			if !tc.endsAt.IsZero() && !v.End.Time.Equal(tc.endsAt) {
				t.Fatalf("ends at %v, want %v", v.End, tc.endsAt)
			}
		})
	}
}
