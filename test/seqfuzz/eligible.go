package seqfuzz

import (
	"context"
	"fmt"
	"slices"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/eligibility"
	"github.com/operator-framework/oria/internal/record"
	"github.com/operator-framework/oria/internal/testutil"
)

// Eligible access: the admin makes V or D (through a group) eligible for
// the extension's edit in some of the victims' namespaces, approved by the
// group of A (A and V: V is an approver too, so that V approving her own
// request is the two-person rule, not a missing right) or by no one
// (self-activation). V, D, A and C may create and update AccessRequests:
// the guard decides the rest. C is never an approver.
var (
	eligSubjects  = []string{"V's group", "D's group", "V's and D's groups"}
	eligApprovers = []string{"A's group (A, V)", "A's group (A, V)", "none (self-activation)"}
	eligTargets   = [][]string{{"v1"}, {"v1", "v2"}, {"v2"}}
	eligMax       = []time.Duration{8 * time.Second, 12 * time.Second}
	eligChanges   = []string{"delete it", "narrow it to its first namespace"}
	reqPersonas   = []string{"V", "D"}
	reqVariants   = []string{"valid", "valid", "valid", "duration over the maximum", "duration zero",
		"a namespace outside the policy", "spec.requester naming another user"}
	reqTargets  = []string{"all the policy's namespaces", "the policy's first namespace"}
	approveWho  = []string{"A", "A", "the requester", "C (no approver)", "V"}
	endWho      = []string{"the requester", "A", "admin"}
	groupOf     = map[string]string{"V": "vgroup", "D": "dgroup"}
	approverSet = []string{"A", "V"}
)

// reqDuration is a request's duration choice (5 to 10 s), capped at max.
func reqDuration(d int, max time.Duration) time.Duration {
	return min(time.Duration(5+d%6)*time.Second, max)
}

func eligibleString(s Step) string {
	switch s.Op {
	case OpAdminEligible:
		return fmt.Sprintf("admin: eligible RBACPolicy, extension edit for %s in %v, at most %v, approvers: %s", pick(eligSubjects, s.A),
			pick(eligTargets, s.C), pick(eligMax, s.D), pick(eligApprovers, s.B))
	case OpAdminEligibleChange:
		return fmt.Sprintf("admin: eligible policy#%s: %s", ref(s.A), pick(eligChanges, s.B))
	case OpRequest:
		return fmt.Sprintf("%s: request on eligible policy#%s, %s, %s, %d s (at most the maximum)", pick(reqPersonas, s.A), ref(s.E),
			pick(reqVariants, s.B), pick(reqTargets, s.C), 5+s.D%6)
	case OpApprove:
		return fmt.Sprintf("%s: approve request#%s", pick(approveWho, s.A), ref(s.E))
	case OpDeny:
		return fmt.Sprintf("A: deny request#%s, with a reason", ref(s.E))
	case OpEnd:
		return fmt.Sprintf("%s: end (or cancel) request#%s", pick(endWho, s.A), ref(s.E))
	}
	return fmt.Sprintf("op %d", s.Op)
}

// user is persona p's user name (the admin's for "admin").
func (w *World) user(p string) string {
	if p == "admin" {
		return w.Prefix + "-admin"
	}
	return w.Users[p]
}

func requestName(i int) string { return fmt.Sprintf("request#%d", i) }

func (w *World) group(g string) string { return w.Prefix + "-" + g }

// requesterBinding lets V, D, A and C create and update AccessRequests.
func (w *World) requesterBinding() *rbacv1.ClusterRoleBinding {
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: w.Prefix + "-requesters"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleRequester}}
	for _, p := range []string{"V", "D", "A", "C"} {
		crb.Subjects = append(crb.Subjects, testutil.User(w.Users[p]))
	}
	return crb
}

// as is a client of persona p in its groups (V: vgroup and approvers, D:
// dgroup, A: approvers); "admin" is an admin (system:masters) named
// <prefix>-admin.
func (w *World) as(p string) client.Client {
	if w.inGroups == nil {
		w.inGroups = map[string]client.Client{}
	}
	if c, ok := w.inGroups[p]; ok {
		return c
	}
	groups := map[string][]string{"V": {w.group("vgroup"), w.group("approvers")}, "D": {w.group("dgroup")}, "A": {w.group("approvers")},
		"admin": {"system:masters"}}[p]
	c, err := w.env.As(w.user(p), groups...)
	if err != nil {
		c = w.Clients[p]
	}
	w.inGroups[p] = c
	return c
}

func groupSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

func (w *World) execEligible(ctx context.Context, s Step, m *Model) string {
	switch s.Op {
	case OpAdminEligible:
		return w.adminEligible(ctx, s, m)
	case OpAdminEligibleChange:
		return w.adminEligibleChange(ctx, s, m)
	case OpRequest:
		return w.request(ctx, s, m)
	}
	return w.decide(ctx, s, m)
}

func (w *World) adminEligible(ctx context.Context, s Step, m *Model) string {
	e := &Eligible{Subjects: [][]string{{"V"}, {"D"}, {"V", "D"}}[s.A%3], Approvers: s.B%3 != 2, Names: pick(eligTargets, s.C),
		Max: pick(eligMax, s.D), Caps: roleCaps["extension edit"], Dropped: map[string]time.Time{}}
	var subjects, approvers []rbacv1.Subject
	for _, p := range e.Subjects {
		subjects = append(subjects, groupSubject(w.group(groupOf[p])))
	}
	if e.Approvers {
		approvers = []rbacv1.Subject{groupSubject(w.group("approvers"))}
	}
	var names []string
	for _, k := range e.Names {
		names = append(names, w.NS(k))
	}
	p := &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: w.name("ep")}, Spec: oriav1alpha1.RBACPolicySpec{
		ExtensionName: w.env.Ext, Access: oriav1alpha1.AccessEdit, Subjects: subjects, Namespaces: names,
		APIs:        []oriav1alpha1.APIRef{{Group: w.env.Group, Resource: w.env.Plural}},
		Eligibility: &oriav1alpha1.Eligibility{MaxDuration: metav1.Duration{Duration: e.Max}, Approvers: approvers}}}
	if err := w.env.Admin.Create(ctx, p); err != nil {
		return "admin's eligible policy failed: " + short(err)
	}
	w.eligible = append(w.eligible, p.Name)
	m.Eligible = append(m.Eligible, e)
	return fmt.Sprintf("eligible policy#%d: RBACPolicy %s", len(m.Eligible)-1, p.Name)
}

func (w *World) adminEligibleChange(ctx context.Context, s Step, m *Model) string {
	if len(w.eligible) == 0 {
		return "no eligible policy: nothing to do"
	}
	i := ((s.A % len(w.eligible)) + len(w.eligible)) % len(w.eligible)
	e, p := m.Eligible[i], &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: w.eligible[i]}}
	now := time.Now()
	if s.B%len(eligChanges) == 0 {
		err := w.env.Admin.Delete(ctx, p)
		if e.Deleted.IsZero() {
			e.Deleted = now
		}
		return fmt.Sprintf("deleted %s: %s", p.Name, outcome(err))
	}
	err := w.patchSpec(ctx, w.env.Admin, p, map[string]any{"namespaces": []string{w.NS(e.Names[0])}})
	if err == nil {
		for _, k := range e.Names[1:] {
			if _, ok := e.Dropped[k]; !ok {
				e.Dropped[k] = now
			}
		}
	}
	return fmt.Sprintf("%s narrowed to %s: %s", p.Name, w.NS(e.Names[0]), outcome(err))
}

// admitted records a write the guard must have refused.
func (w *World) admitted(what string) {
	w.stepViolations = append(w.stepViolations, Violation{Admitted: what})
}

func (w *World) request(ctx context.Context, s Step, m *Model) string {
	if len(w.eligible) == 0 {
		return "no eligible policy: nothing to do"
	}
	pi := ((s.E % len(w.eligible)) + len(w.eligible)) % len(w.eligible)
	e, who := m.Eligible[pi], pick(reqPersonas, s.A)
	names := e.Names
	if s.C%len(reqTargets) == 1 {
		names = names[:1]
	}
	variant := pick(reqVariants, s.B)
	dur, requester := reqDuration(s.D, e.Max), w.Users[who]
	switch variant {
	case "duration over the maximum":
		dur = e.Max + 5*time.Second
	case "duration zero":
		dur = 0
	case "a namespace outside the policy":
		names = append(slices.Clone(names), "n")
	case "spec.requester naming another user":
		requester = w.Users[pick(reqPersonas, s.A+1)]
	}
	var nsNames []string
	for _, k := range names {
		nsNames = append(nsNames, w.NS(k))
	}
	r := &oriav1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: w.name("rq")}, Spec: oriav1alpha1.AccessRequestSpec{
		PolicyName: w.eligible[pi], Requester: requester, EligibleAs: new(groupSubject(w.group(groupOf[who]))),
		Namespaces: nsNames, Duration: metav1.Duration{Duration: dur}, Reason: "seqfuzz"}}
	now := time.Now()
	err := w.as(who).Create(ctx, r)
	if err != nil {
		return fmt.Sprintf("AccessRequest %s: %s", r.Name, outcome(err))
	}
	valid := variant == "valid" && slices.Contains(e.Subjects, who) && e.Deleted.IsZero()
	for _, k := range names {
		valid = valid && e.live(k, now)
	}
	if !valid {
		w.admitted(fmt.Sprintf("%s's request %s (%s) on %s", who, r.Name, variant, w.eligible[pi]))
	}
	w.requests = append(w.requests, r.Name)
	q := &Request{Subject: who, Policy: pi, Names: names, Dur: dur}
	if !e.Approvers {
		q.Dur = dur + time.Second // self-activated: from creation, rounded up
		m.started(q, now)
	}
	m.Requests = append(m.Requests, q)
	return fmt.Sprintf("request#%d: AccessRequest %s: admitted", len(m.Requests)-1, r.Name)
}

// decide writes an approval, a denial or an end on a request.
func (w *World) decide(ctx context.Context, s Step, m *Model) string {
	if len(w.requests) == 0 {
		return "no request: nothing to do"
	}
	i := ((s.E % len(w.requests)) + len(w.requests)) % len(w.requests)
	q, e := m.Requests[i], m.Eligible[m.Requests[i].Policy]
	keys, who, reason := eligibility.Approval, "A", ""
	switch s.Op {
	case OpApprove:
		who = map[string]string{"the requester": q.Subject, "C (no approver)": "C"}[pick(approveWho, s.A)]
		if who == "" {
			who = pick(approveWho, s.A)
		}
	case OpDeny:
		keys, reason = eligibility.Denial, "seqfuzz says no"
	case OpEnd:
		keys, who, reason = eligibility.End, pick(endWho, s.A), "done"
		if who == "the requester" {
			who = q.Subject
		}
	}
	user := w.user(who)
	now := time.Now()
	obj := &oriav1alpha1.AccessRequest{}
	err := w.env.Admin.Get(ctx, client.ObjectKey{Name: w.requests[i]}, obj)
	if err == nil {
		obj.Annotations = keys.Set(obj.Annotations, record.Record{By: user, At: record.Now(now), Reason: reason})
		err = w.as(who).Update(ctx, obj)
	}
	pending := q.Start.IsZero() && q.Closed.IsZero() && e.Deleted.IsZero()
	if err != nil {
		return fmt.Sprintf("%s by %s on %s: %s", keys.What, who, w.requests[i], outcome(err))
	}
	switch s.Op {
	case OpApprove, OpDeny:
		if !pending || who == q.Subject || !slices.Contains(approverSet, who) || !e.Approvers {
			w.admitted(fmt.Sprintf("%s of %s (%s's) by %s", keys.What, w.requests[i], q.Subject, who))
		}
		if s.Op == OpApprove {
			m.started(q, now)
		} else if q.Closed.IsZero() {
			q.Closed = now
		}
	case OpEnd:
		if q.Closed.IsZero() {
			q.Closed = now
		}
	}
	return fmt.Sprintf("%s by %s on %s: admitted", keys.What, who, w.requests[i])
}

// cleanupRequests deletes the run's AccessRequests.
func (w *World) cleanupRequests(ctx context.Context) {
	for _, n := range w.requests {
		_ = w.env.Admin.Delete(ctx, &oriav1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
}
