// Package eligibility is the pure model of eligible access (issue 43): who
// may request the activation of an eligible RBACPolicy, who may approve,
// deny or end a request (Admit, the guard's rules), and what a request is
// now (Assess, the AccessRequest controller's decision). Identities are the
// ones the API server authenticated: the requester is the creator of the
// request, a decision's author the writer of its record (annotations under
// record's rule: a "-by" must be the writer, an "-at" now). Nothing here
// reads the cluster.
package eligibility

import (
	"slices"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/record"
	"github.com/operator-framework/oria/internal/subjects"
)

// DefaultRequestTimeout is how long a request waits for approval when the
// policy does not say.
const DefaultRequestTimeout = time.Hour

// The records of the decisions on a request, each written once, whole, by
// its author (record.Keys: by, at, reason).
var (
	Approval = record.Keys{By: oriav1alpha1.AnnotationApprovedBy, At: oriav1alpha1.AnnotationApprovedAt, Reason: oriav1alpha1.AnnotationApproveReason, What: "approval"}
	Denial   = record.Keys{By: oriav1alpha1.AnnotationDeniedBy, At: oriav1alpha1.AnnotationDeniedAt, Reason: oriav1alpha1.AnnotationDenyReason, What: "denial"}
	End      = record.Keys{By: oriav1alpha1.AnnotationEndedBy, At: oriav1alpha1.AnnotationEndedAt, Reason: oriav1alpha1.AnnotationEndReason, What: "end"}
)

// Decisions are the three records, in the order they are judged.
var Decisions = []record.Keys{Denial, Approval, End}

// User is who the API server authenticated: a name and the groups it
// belongs to now.
type User struct {
	Name   string
	Groups []string
}

// EligibleAs returns the subject through which the request's requester is
// eligible: spec.eligibleAs, or their own User.
func EligibleAs(r *oriav1alpha1.AccessRequest) rbacv1.Subject {
	if s := r.Spec.EligibleAs; s != nil {
		return normal(*s)
	}
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: r.Spec.Requester}
}

// normal is s as RBAC compares it (the API group of a User or Group).
func normal(s rbacv1.Subject) rbacv1.Subject {
	return subjects.Normalize([]rbacv1.Subject{s}, "")[0]
}

// Lists reports whether the policy names subject s (a ServiceAccount
// listed in the policy counts as its user name).
func Lists(p *oriav1alpha1.RBACPolicy, s rbacv1.Subject) bool {
	s = normal(s)
	return slices.ContainsFunc(p.Spec.Subjects, func(x rbacv1.Subject) bool {
		x = normal(x)
		if x.Kind == rbacv1.ServiceAccountKind && s.Kind == rbacv1.UserKind {
			return subjects.ServiceAccountUser(x.Namespace, x.Name) == s.Name
		}
		return x.Kind == s.Kind && x.Name == s.Name && x.Namespace == s.Namespace
	})
}

// Is reports whether u is subject s: the user itself, or in the group.
func (u User) Is(s rbacv1.Subject) bool {
	switch s.Kind {
	case rbacv1.UserKind:
		return s.Name == u.Name
	case rbacv1.GroupKind:
		return slices.Contains(u.Groups, s.Name)
	case rbacv1.ServiceAccountKind:
		return subjects.ServiceAccountUser(s.Namespace, s.Name) == u.Name
	}
	return false
}

// Approver reports whether u is one of the policy's approvers (directly or
// through a group it belongs to now).
func Approver(p *oriav1alpha1.RBACPolicy, u User) bool {
	return p.Spec.Eligibility != nil && slices.ContainsFunc(p.Spec.Eligibility.Approvers, u.Is)
}

// SelfActivated reports whether the policy's requests need no approver.
func SelfActivated(p *oriav1alpha1.RBACPolicy) bool {
	return p.Spec.Eligibility != nil && len(p.Spec.Eligibility.Approvers) == 0
}

// RequestTimeout is how long a request of p waits for approval.
func RequestTimeout(p *oriav1alpha1.RBACPolicy) time.Duration {
	if e := p.Spec.Eligibility; e != nil && e.RequestTimeout != nil && e.RequestTimeout.Duration > 0 {
		return e.RequestTimeout.Duration
	}
	return DefaultRequestTimeout
}

// Namespaces returns the requested namespaces the policy allows, sorted:
// those it lists, or all when it lists none (cluster-wide).
func Namespaces(p *oriav1alpha1.RBACPolicy, requested []string) []string {
	out := slices.Compact(slices.Sorted(slices.Values(requested)))
	if len(p.Spec.Namespaces) == 0 {
		return out
	}
	return slices.DeleteFunc(out, func(ns string) bool { return !slices.Contains(p.Spec.Namespaces, ns) })
}
