package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/eligibility"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/record"
)

// RequestOptions are the flags of `kubectl oria request`.
type RequestOptions struct {
	// Policy names the eligible RBACPolicy; empty: the one Extension and
	// Access select among those the user is eligible for.
	Policy, Extension, Access string
	Namespaces                []string
	For, Reason, Name         string
}

// Me is who the API server says the plugin's user is (a
// SelfSubjectReview): their name and groups.
func Me(ctx context.Context, c client.Client) (eligibility.User, error) {
	r := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, r); err != nil {
		return eligibility.User{}, fmt.Errorf("asking the API server who you are (a SelfSubjectReview): %w", err)
	}
	if r.Status.UserInfo.Username == "" {
		return eligibility.User{}, fmt.Errorf("the API server did not say who you are (a SelfSubjectReview)")
	}
	return eligibility.User{Name: r.Status.UserInfo.Username, Groups: r.Status.UserInfo.Groups}, nil
}

// ChoosePolicy returns the eligible policy of policies that o selects for
// u (by name, or by extension and access), covering o's namespaces, and
// the subject u is eligible as; an error saying why none fits.
func ChoosePolicy(policies []oriav1alpha1.RBACPolicy, o RequestOptions, u eligibility.User) (*oriav1alpha1.RBACPolicy, rbacv1.Subject, error) {
	slices.SortFunc(policies, func(a, b oriav1alpha1.RBACPolicy) int { return strings.Compare(a.Name, b.Name) })
	var seen []string
	for i := range policies {
		p := &policies[i]
		if p.Spec.Eligibility == nil || (o.Policy != "" && p.Name != o.Policy) ||
			(o.Policy == "" && (p.Spec.ExtensionName != o.Extension || string(p.Spec.Access) != o.Access)) {
			continue
		}
		seen = append(seen, p.Name)
		if len(eligibility.Namespaces(p, o.Namespaces)) != len(slices.Compact(slices.Sorted(slices.Values(o.Namespaces)))) {
			continue
		}
		// Their own User first, then a group.
		subj := slices.SortedFunc(slices.Values(p.Spec.Subjects), func(a, b rbacv1.Subject) int { return strings.Compare(b.Kind, a.Kind) })
		for _, s := range subj {
			if (s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind) && u.Is(s) {
				return p, s, nil
			}
		}
	}
	what := fmt.Sprintf("%s access to ClusterExtension %q", o.Access, o.Extension)
	if o.Policy != "" {
		what = fmt.Sprintf("RBACPolicy %q", o.Policy)
	}
	if len(seen) == 0 {
		return nil, rbacv1.Subject{}, fmt.Errorf("no eligible RBACPolicy for %s", what)
	}
	return nil, rbacv1.Subject{}, fmt.Errorf("user %q (groups %s) is not eligible for %s in %s (eligible policies: %s)",
		u.Name, strings.Join(u.Groups, ", "), what, strings.Join(o.Namespaces, ", "), strings.Join(seen, ", "))
}

// Request is the AccessRequest of o for u through policy p, as subject as.
func (o RequestOptions) Request(p *oriav1alpha1.RBACPolicy, as rbacv1.Subject, u eligibility.User, now time.Time) (*oriav1alpha1.AccessRequest, error) {
	d, err := ParseFor(o.For)
	if err != nil {
		return nil, err
	}
	name := o.Name
	if name == "" {
		name = names.Join("req", nameSlug(u.Name), names.Hash(p.Name, u.Name, now.UTC().Format(time.RFC3339Nano))[:6])
	}
	var eligibleAs *rbacv1.Subject
	if as.Kind != rbacv1.UserKind {
		eligibleAs = &rbacv1.Subject{Kind: as.Kind, APIGroup: rbacv1.GroupName, Name: as.Name}
	}
	return &oriav1alpha1.AccessRequest{
		TypeMeta:   metav1.TypeMeta{APIVersion: oriav1alpha1.GroupVersion.String(), Kind: "AccessRequest"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: oriav1alpha1.AccessRequestSpec{PolicyName: p.Name, Requester: u.Name, EligibleAs: eligibleAs,
			Namespaces: slices.Compact(slices.Sorted(slices.Values(o.Namespaces))), Duration: metav1.Duration{Duration: d}, Reason: o.Reason},
	}, nil
}

// Decision is the merge patch that writes decision k on a request, by
// user, now, with reason.
func Decision(k record.Keys, user, reason string, now time.Time) map[string]any {
	ann := map[string]any{}
	for key, v := range k.Set(nil, record.Record{By: user, At: record.Now(now), Reason: reason}) {
		ann[key] = v
	}
	return map[string]any{"metadata": map[string]any{"annotations": ann}}
}

// RequestFilter selects the requests `kubectl oria requests` lists.
type RequestFilter string

// The filters of `kubectl oria requests`.
const (
	RequestsPending RequestFilter = "pending"
	RequestsActive  RequestFilter = "active"
	RequestsAll     RequestFilter = "all"
)

// RequestsTable lists requests (oldest first) that f selects: who, what,
// where, state, until when, approved by whom, why.
func RequestsTable(requests []oriav1alpha1.AccessRequest, f RequestFilter) (*metav1.Table, []string) {
	slices.SortFunc(requests, func(a, b oriav1alpha1.AccessRequest) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	t := &metav1.Table{ColumnDefinitions: columns([]string{"NAME", "REQUESTER", "POLICY", "NAMESPACES", "DURATION", "STATE", "APPROVED BY", "STARTS", "ENDS", "REASON"},
		"ENDED BY", "MESSAGE")}
	var names []string
	for _, r := range requests {
		st := r.Status.State
		switch {
		case f == RequestsPending && st != oriav1alpha1.StateRequested && st != "",
			f == RequestsActive && st != oriav1alpha1.StateActive:
			continue
		}
		msg := ""
		for _, c := range r.Status.Conditions {
			if c.Type == oriav1alpha1.TypeActive {
				msg = c.Reason + ": " + c.Message
			}
		}
		t.Rows = append(t.Rows, row(r.Name, r.Spec.Requester, r.Spec.PolicyName, strings.Join(r.Spec.Namespaces, ","), r.Spec.Duration.Duration.String(),
			string(st), r.Status.ApprovedBy, stampOrDash(r.Status.StartsAt), stampOrDash(r.Status.EndsAt), r.Spec.Reason, r.Status.EndedBy, msg))
		names = append(names, "accessrequest.oria.operatorframework.io/"+r.Name)
	}
	return t, names
}

func stampOrDash(t *metav1.Time) string {
	if t == nil {
		return "-"
	}
	return record.Now(t.Time)
}
