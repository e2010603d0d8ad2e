package cli

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/names"
	policymodel "github.com/operator-framework/oria/internal/policy"
	"github.com/operator-framework/oria/internal/record"
)

// GrantOptions are what `kubectl oria grant` grants: the RBACPolicy it
// creates (Policy).
type GrantOptions struct {
	// User, Groups and ServiceAccounts (NAMESPACE/NAME) are the subjects,
	// as `kubectl oria can` names an identity; at least one.
	User            string
	Groups          []string
	ServiceAccounts []string
	Extension       string
	Access          string
	// Namespaces, or AllNamespaces (a cluster-wide grant): exactly one.
	Namespaces    []string
	AllNamespaces bool
	// APIs narrow the grant to some of the extension's APIs,
	// RESOURCE.GROUP each (a CRD's name); none: all of them.
	APIs []string
	// For (a duration from now) or Until (an RFC 3339 time): exactly one.
	For   string
	Until string
	// Reason is recorded in the AnnotationReason annotation.
	Reason string
	// Name is the policy's name; empty: GrantName.
	Name string
	// Ceiling (NAMESPACE/NAME) is the ServiceAccount oria writes the
	// bindings as (spec.serviceAccount): the grant is at most what it may
	// grant. Empty: none.
	Ceiling string
	// GrantedBy is the requester, as the API server authenticates them
	// (WhoAmI): recorded with the time of the grant (record.Grant); the
	// guard refuses any other name. Empty: no record of who.
	GrantedBy string
}

// MaxGrant is the longest a grant made with `kubectl oria grant` lasts:
// a break-glass grant is short; a standing one is an RBACPolicy written
// for it (with a spec.expiresAt, or none).
const MaxGrant = 90 * 24 * time.Hour

// Subjects returns the subjects the options name: the user, the groups,
// then the ServiceAccounts.
func (o GrantOptions) Subjects() ([]rbacv1.Subject, error) {
	var out []rbacv1.Subject
	if o.User != "" {
		out = append(out, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: o.User})
	}
	for _, g := range o.Groups {
		out = append(out, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: g})
	}
	for _, sa := range o.ServiceAccounts {
		ns, name, ok := cutNamespaced(sa)
		if !ok {
			return nil, fmt.Errorf("--serviceaccount %q: want NAMESPACE/NAME", sa)
		}
		out = append(out, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name})
	}
	if len(out) == 0 {
		return nil, errors.New("name whom to grant: a USER, --group or --serviceaccount")
	}
	if problems := policymodel.ValidateSubjects(out); len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return out, nil
}

// accessLevels are the levels grant takes, as RBACPolicy's spec.access.
var accessLevels = []string{string(oriav1alpha1.AccessView), string(oriav1alpha1.AccessEdit), string(oriav1alpha1.AccessAdmin)}

// ExpiresAt returns when the grant ends: now plus For, or Until, in whole
// seconds (rounded down: never later than asked), which must be after now.
func (o GrantOptions) ExpiresAt(now time.Time) (*metav1.Time, error) {
	var end time.Time
	switch {
	case (o.For == "") == (o.Until == ""):
		return nil, errors.New("say how long the grant lasts: --for DURATION (2h, 90m, 3d, 1w) or --until TIME (RFC 3339), one of them")
	case o.For != "":
		d, err := ParseFor(o.For)
		if err != nil {
			return nil, err
		}
		end = now.Add(d)
	default:
		t, err := time.Parse(time.RFC3339, o.Until)
		if err != nil {
			return nil, fmt.Errorf("--until %q: want an RFC 3339 time, such as 2025-06-06T18:00:00Z or 2025-06-06T20:00:00+02:00", o.Until)
		}
		end = t
	}
	end = end.Truncate(time.Second).UTC()
	if !end.After(now) {
		return nil, fmt.Errorf("the grant would end at %s, which is not after now (%s)", end.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if end.Sub(now) > MaxGrant {
		return nil, fmt.Errorf("the grant would end at %s, more than %s from now: kubectl oria grant makes grants of at most %s; for a standing grant, write an RBACPolicy (kubectl oria plan -f, then kubectl apply -f)",
			end.Format(time.RFC3339), maxGrantText, maxGrantText)
	}
	return &metav1.Time{Time: end}, nil
}

// maxGrantText is MaxGrant as messages say it.
const maxGrantText = "90 days"

// ParseFor parses --for: a Go duration ("2h", "90m", "1h30m"), whole days
// ("3d") or whole weeks ("1w"); positive. ExpiresAt bounds it (MaxGrant).
func ParseFor(s string) (time.Duration, error) {
	var d time.Duration
	var err error
	days, isDays := strings.CutSuffix(s, "d")
	weeks, isWeeks := strings.CutSuffix(s, "w")
	switch {
	case isDays || isWeeks:
		unit, digits := 24*time.Hour, days
		if isWeeks {
			unit, digits = 7*24*time.Hour, weeks
		}
		var n int
		n, err = strconv.Atoi(digits)
		if err == nil && (n <= 0 || n > int(MaxGrant/unit)+1) {
			err = errors.New("out of range")
		}
		d = time.Duration(n) * unit
	default:
		d, err = time.ParseDuration(s)
	}
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("--for %q: want a positive duration, such as 2h, 90m, 1h30m, 3d or 1w (at most %s)", s, maxGrantText)
	}
	return d, nil
}

// Policy returns the RBACPolicy the options describe, as created at now:
// its window ends at ExpiresAt and starts at once (no notBefore: the
// grant holds from its admission, whatever the clocks say), the reason
// is annotated.
func (o GrantOptions) Policy(now time.Time) (*oriav1alpha1.RBACPolicy, error) {
	subj, err := o.Subjects()
	if err != nil {
		return nil, err
	}
	if o.Extension == "" {
		return nil, errors.New("name the ClusterExtension: --extension")
	}
	if !slices.Contains(accessLevels, o.Access) {
		return nil, fmt.Errorf("--access %q: want one of %s", o.Access, strings.Join(accessLevels, ", "))
	}
	if (len(o.Namespaces) == 0) != o.AllNamespaces {
		return nil, errors.New("say where: -n NAMESPACE (repeat, or a comma-separated list) or --all-namespaces (cluster-wide), one of them")
	}
	for _, ns := range o.Namespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			return nil, fmt.Errorf("namespace %q: %s", ns, strings.Join(msgs, "; "))
		}
	}
	apis, err := apiRefs(o.APIs)
	if err != nil {
		return nil, err
	}
	end, err := o.ExpiresAt(now)
	if err != nil {
		return nil, err
	}
	name := o.Name
	if name == "" {
		name = GrantName(subj, o.Extension, o.Access, now)
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return nil, fmt.Errorf("--name %q: %s", name, strings.Join(msgs, "; "))
	}
	p := &oriav1alpha1.RBACPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: oriav1alpha1.GroupVersion.String(), Kind: "RBACPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: o.Extension, Access: oriav1alpha1.Access(o.Access), Subjects: subj,
			Namespaces: slices.Compact(slices.Sorted(slices.Values(o.Namespaces))), APIs: apis, ExpiresAt: end},
	}
	if o.Ceiling != "" {
		ns, sa, ok := cutNamespaced(o.Ceiling)
		if !ok {
			return nil, fmt.Errorf("--ceiling %q: want NAMESPACE/NAME", o.Ceiling)
		}
		p.Spec.ServiceAccount = &oriav1alpha1.ServiceAccountReference{Namespace: ns, Name: sa}
	}
	rec := record.Record{Reason: o.Reason}
	if o.GrantedBy != "" {
		rec.By, rec.At = o.GrantedBy, record.Now(now)
	}
	if !rec.Empty() {
		p.Annotations = record.Grant.Set(nil, rec)
	}
	return p, nil
}

// apiRefs parses --api values, RESOURCE.GROUP each.
func apiRefs(in []string) ([]oriav1alpha1.APIRef, error) {
	var out []oriav1alpha1.APIRef
	for _, s := range in {
		resource, group := names.SplitCRDName(s)
		if resource == "" || group == "" {
			return nil, fmt.Errorf("--api %q: want RESOURCE.GROUP, the name of the API's CRD (such as applications.argoproj.io)", s)
		}
		out = append(out, oriav1alpha1.APIRef{Group: group, Resource: resource})
	}
	return out, nil
}

// grantSlugLength is the longest part of a generated name taken from the
// first subject's name.
const grantSlugLength = 40

// GrantName is the name grant gives a policy: "grant-<first subject>-<hash>",
// the subject's name made a valid name (lowercase; other characters "-";
// at most grantSlugLength), the hash of every subject, the extension, the
// access and now, so that two grants never share a name (an expired grant
// stays, as its record).
func GrantName(subj []rbacv1.Subject, extension, access string, now time.Time) string {
	parts := []string{extension, access, now.UTC().Format(time.RFC3339Nano)}
	for _, s := range subj {
		parts = append(parts, s.Kind, s.Namespace, s.Name)
	}
	slug := "subject"
	if len(subj) > 0 {
		slug = nameSlug(strings.TrimPrefix(strings.Join([]string{subj[0].Namespace, subj[0].Name}, "-"), "-"))
	}
	return "grant-" + slug + "-" + names.Hash(parts...)
}

// nameSlug makes s a readable part of a DNS subdomain name: lowercase
// letters, digits and single hyphens, at most grantSlugLength; "subject"
// when nothing is left.
func nameSlug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= grantSlugLength {
			break
		}
	}
	if out := strings.Trim(b.String(), "-"); out != "" {
		return out
	}
	return "subject"
}

// grantSummary says what a policy grants, to whom, where and until when,
// for the line grant prints when it created it.
func grantSummary(p *oriav1alpha1.RBACPolicy, now time.Time) string {
	where := "cluster-wide"
	if len(p.Spec.Namespaces) > 0 {
		where = "in " + strings.Join(p.Spec.Namespaces, ", ")
	}
	return fmt.Sprintf("%s on %s's APIs for %s %s, %s", p.Spec.Access, p.Spec.ExtensionName,
		strings.Join(subjectStrings(p.Spec.Subjects), ", "), where, windowOf(binding.PolicyWindow(p.Spec), now))
}
