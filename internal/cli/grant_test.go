package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
)

func TestGrantPolicy(t *testing.T) {
	now := time.Date(2025, 6, 6, 16, 0, 0, 300_000_000, time.UTC)
	base := GrantOptions{User: "alice", Extension: "argocd", Access: "edit", Namespaces: []string{"team-b", "team-a", "team-b"}, For: "2h", Name: "break-glass"}
	meta := metav1.TypeMeta{APIVersion: oriav1alpha1.GroupVersion.String(), Kind: "RBACPolicy"}
	user := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}
	end := &metav1.Time{Time: time.Date(2025, 6, 6, 18, 0, 0, 0, time.UTC)}
	for _, tc := range []struct {
		name   string
		change func(*GrantOptions)
		want   *oriav1alpha1.RBACPolicy
		err    string
	}{
		{"namespaces sorted, once; the end in whole seconds, rounded down", func(*GrantOptions) {},
			&oriav1alpha1.RBACPolicy{TypeMeta: meta, ObjectMeta: metav1.ObjectMeta{Name: "break-glass"}, Spec: oriav1alpha1.RBACPolicySpec{
				ExtensionName: "argocd", Access: "edit", Subjects: []rbacv1.Subject{user}, Namespaces: []string{"team-a", "team-b"}, ExpiresAt: end}}, ""},
		{"every kind of subject, cluster-wide, until, a reason, an API", func(o *GrantOptions) {
			o.Groups, o.ServiceAccounts, o.Namespaces, o.AllNamespaces = []string{"sre"}, []string{"ci/deployer"}, nil, true
			o.For, o.Until, o.Reason, o.APIs = "", "2025-06-06T20:00:00+02:00", "INC-1234", []string{"applications.argoproj.io"}
		}, &oriav1alpha1.RBACPolicy{TypeMeta: meta, ObjectMeta: metav1.ObjectMeta{Name: "break-glass", Annotations: map[string]string{oriav1alpha1.AnnotationReason: "INC-1234"}},
			Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: "argocd", Access: "edit", ExpiresAt: end,
				Subjects: []rbacv1.Subject{user, {Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "sre"}, {Kind: rbacv1.ServiceAccountKind, Namespace: "ci", Name: "deployer"}},
				APIs:     []oriav1alpha1.APIRef{{Group: "argoproj.io", Resource: "applications"}}}}, ""},
		{"days", func(o *GrantOptions) { o.For = "1d" }, nil, ""},
		{"no subject", func(o *GrantOptions) { o.User = "" }, nil, "name whom to grant"},
		{"a ServiceAccount without its namespace", func(o *GrantOptions) { o.ServiceAccounts = []string{"deployer"} }, nil, "want NAMESPACE/NAME"},
		{"an invalid ServiceAccount", func(o *GrantOptions) { o.ServiceAccounts = []string{"ci/Deployer"} }, nil, "is not valid"},
		{"no extension", func(o *GrantOptions) { o.Extension = "" }, nil, "--extension"},
		{"a level that is not one", func(o *GrantOptions) { o.Access = "owner" }, nil, "want one of view, edit, admin"},
		{"nowhere", func(o *GrantOptions) { o.Namespaces = nil }, nil, "say where"},
		{"both -n and -A", func(o *GrantOptions) { o.AllNamespaces = true }, nil, "say where"},
		{"an invalid namespace", func(o *GrantOptions) { o.Namespaces = []string{"Team_A"} }, nil, `namespace "Team_A"`},
		{"no end", func(o *GrantOptions) { o.For = "" }, nil, "say how long"},
		{"two ends", func(o *GrantOptions) { o.Until = "2025-06-06T18:00:00Z" }, nil, "say how long"},
		{"a duration that is not one", func(o *GrantOptions) { o.For = "2 hours" }, nil, "want a positive duration"},
		{"a negative duration", func(o *GrantOptions) { o.For = "-1h" }, nil, "want a positive duration"},
		{"a time that is not RFC 3339", func(o *GrantOptions) { o.For, o.Until = "", "Friday 18:00" }, nil, "want an RFC 3339 time"},
		{"an end in the past", func(o *GrantOptions) { o.For, o.Until = "", "2025-06-06T15:00:00Z" }, nil, "not after now"},
		{"an end within the second", func(o *GrantOptions) { o.For = "500ms" }, nil, "not after now"},
		{"weeks", func(o *GrantOptions) { o.For = "1w" }, nil, ""},
		{"the longest", func(o *GrantOptions) { o.For = "90d" }, nil, ""},
		{"longer than the longest", func(o *GrantOptions) { o.For = "400d" }, nil, "at most 90 days"},
		{"longer than the longest, in hours", func(o *GrantOptions) { o.For = "2161h" }, nil, "at most 90 days"},
		{"until beyond the longest", func(o *GrantOptions) { o.For, o.Until = "", "2026-06-06T16:00:00Z" }, nil, "at most 90 days"},
		{"the record of who", func(o *GrantOptions) { o.GrantedBy, o.Reason = "admin@example.com", "INC-1" },
			&oriav1alpha1.RBACPolicy{TypeMeta: meta, ObjectMeta: metav1.ObjectMeta{Name: "break-glass", Annotations: map[string]string{
				oriav1alpha1.AnnotationReason: "INC-1", oriav1alpha1.AnnotationGrantedBy: "admin@example.com", oriav1alpha1.AnnotationGrantedAt: "2025-06-06T16:00:00Z"}},
				Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: "argocd", Access: "edit", Subjects: []rbacv1.Subject{user}, Namespaces: []string{"team-a", "team-b"}, ExpiresAt: end}}, ""},
		{"an API that is not RESOURCE.GROUP", func(o *GrantOptions) { o.APIs = []string{"applications"} }, nil, "want RESOURCE.GROUP"},
		{"an invalid name", func(o *GrantOptions) { o.Name = "Break Glass" }, nil, `--name "Break Glass"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			o.Namespaces = append([]string(nil), base.Namespaces...)
			tc.change(&o)
			got, err := o.Policy(now)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q in it", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				return
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Policy (-want +got):\n%s", d)
			}
		})
	}
}

func TestParseFor(t *testing.T) {
	for in, want := range map[string]time.Duration{"2h": 2 * time.Hour, "90m": 90 * time.Minute, "1h30m": 90 * time.Minute, "3d": 72 * time.Hour,
		"2w": 14 * 24 * time.Hour, "90d": MaxGrant, "0s": 0, "-2h": 0, "d": 0, "w": 0, "0w": 0, "-1d": 0, "1.5d": 0, "9999999999999d": 0, "": 0} {
		got, err := ParseFor(in)
		if (err != nil) != (want == 0) || got != want {
			t.Errorf("ParseFor(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

// TestGrantName: a valid name, readable, the same for the same grant at
// the same instant, another for another grant or instant.
func TestGrantName(t *testing.T) {
	now := time.Date(2025, 6, 6, 16, 0, 0, 0, time.UTC)
	alice := []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "alice@example.com"}}
	name := GrantName(alice, "argocd", "edit", now)
	if !strings.HasPrefix(name, "grant-alice-example-com-") {
		t.Errorf("GrantName = %q, want the subject's name in it", name)
	}
	if name != GrantName(alice, "argocd", "edit", now) {
		t.Error("GrantName is not deterministic")
	}
	others := map[string]string{
		"later":      GrantName(alice, "argocd", "edit", now.Add(time.Nanosecond)),
		"view":       GrantName(alice, "argocd", "view", now),
		"extension":  GrantName(alice, "other", "edit", now),
		"subjects":   GrantName(append(alice, rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "sre"}), "argocd", "edit", now),
		"group":      GrantName([]rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "alice@example.com"}}, "argocd", "edit", now),
		"no subject": GrantName(nil, "argocd", "edit", now),
	}
	for what, other := range others {
		if other == name {
			t.Errorf("another %s, the same name %q", what, name)
		}
	}
	for _, subj := range []rbacv1.Subject{
		{Kind: rbacv1.UserKind, Name: strings.Repeat("Very Long Name ", 20)},
		{Kind: rbacv1.GroupKind, Name: "system:masters"},
		{Kind: rbacv1.ServiceAccountKind, Namespace: "ci", Name: "deployer"},
		{Kind: rbacv1.UserKind, Name: "ÄÖÜ"},
	} {
		n := GrantName([]rbacv1.Subject{subj}, "argocd", "edit", now)
		if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 || len(n) > 63 {
			t.Errorf("GrantName(%s) = %q: %v", subj.Name, n, msgs)
		}
		t.Logf("%s %s: %s", subj.Kind, subj.Name, n)
	}
}

func TestRevokeTarget(t *testing.T) {
	for in, want := range map[string]string{
		"grant-alice-1":            "RBACPolicy grant-alice-1",
		"rbacpolicy/grant-alice-1": "RBACPolicy grant-alice-1",
		"rbacpolicy.oria.operatorframework.io/grant-alice-1": "RBACPolicy grant-alice-1",
		"rbacp/x":           "RBACPolicy x",
		"scopeinstances/si": "ScopeInstance si",
		"ScopeInstance/si":  "ScopeInstance si",
		"rolebinding/x":     "",
		"rbacpolicy/":       "",
		"a/b/c":             "",
	} {
		obj, err := RevokeTarget(in)
		got := ""
		if err == nil {
			got = kindOfObject(obj) + " " + obj.GetName()
		}
		if got != want {
			t.Errorf("RevokeTarget(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestRevokeAt(t *testing.T) {
	now := time.Date(2025, 6, 6, 16, 0, 0, 700_000_000, time.UTC)
	nowWhole := &metav1.Time{Time: time.Date(2025, 6, 6, 16, 0, 0, 0, time.UTC)}
	for _, tc := range []struct {
		name    string
		w       binding.Window
		end     *metav1.Time
		already string
		err     error
	}{
		{"no window: one that ends now", binding.Window{}, nowWhole, "", nil},
		{"an end ahead: now", binding.Window{ExpiresAt: at(2 * time.Hour)}, nowWhole, "", nil},
		{"started: now", binding.Window{NotBefore: &metav1.Time{Time: now.Add(-time.Hour)}}, nowWhole, "", nil},
		{"ended", binding.Window{ExpiresAt: &metav1.Time{Time: now.Add(-time.Minute)}}, nil, "expired at 2025-06-06T15:59:00Z", nil},
		{"not started", binding.Window{NotBefore: &metav1.Time{Time: now.Add(time.Hour)}}, nil, "", ErrNotStarted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			end, already, err := RevokeAt(tc.w, now)
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if d := cmp.Diff(tc.end, end); d != "" || already != tc.already {
				t.Errorf("RevokeAt = %v, %q; want %v, %q", end, already, tc.end, tc.already)
			}
			if end != nil && end.After(now) {
				t.Errorf("the end %v is after now", end)
			}
			if end != nil && (binding.Window{NotBefore: tc.w.NotBefore, ExpiresAt: end}).Widens(tc.w) {
				t.Errorf("revoking widens the window %+v", tc.w)
			}
		})
	}
}

// TestGrantCommand runs grant without a cluster (--dry-run=client): -n
// repeats and takes lists (it shadows kubectl's --namespace), -o yaml is
// the policy; the flags' rules are kept.
func TestGrantCommand(t *testing.T) {
	run := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		cmd := NewCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &errOut})
		cmd.SetArgs(args)
		err := cmd.Execute()
		return out.String(), err
	}
	out, err := run("grant", "alice", "--extension", "argocd", "--access", "view", "-n", "team-b", "-n", "team-a,team-c", "--for", "2h",
		"--reason", "INC-1", "--name", "x", "--dry-run=client", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	var p oriav1alpha1.RBACPolicy
	if err := yaml.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if d := cmp.Diff([]string{"team-a", "team-b", "team-c"}, p.Spec.Namespaces); d != "" || p.Kind != "RBACPolicy" || p.Name != "x" ||
		p.Annotations[oriav1alpha1.AnnotationReason] != "INC-1" || p.Spec.ExpiresAt == nil {
		t.Errorf("the policy:\n%s", out)
	}
	for _, absent := range []string{"status:", "creationTimestamp", oriav1alpha1.AnnotationGrantedBy} {
		if strings.Contains(out, absent) {
			t.Errorf("the policy to apply has %s:\n%s", absent, out)
		}
	}
	out, err = run("grant", "alice", "--extension", "argocd", "--access", "view", "-A", "--for", "2h", "--dry-run")
	if err != nil || !strings.HasPrefix(out, "rbacpolicy.oria.operatorframework.io/grant-alice-") || !strings.Contains(out, "created (dry run): view on argocd's APIs for User alice cluster-wide, until ") {
		t.Errorf("grant --dry-run: %v\n%s", err, out)
	}
	for _, bad := range [][]string{
		{"grant", "alice", "--access", "view", "-A", "--for", "2h"},
		{"grant", "alice", "--extension", "argocd", "--access", "view", "-A", "-n", "a", "--for", "2h"},
		{"grant", "alice", "--extension", "argocd", "--access", "view", "-A", "--for", "2h", "--until", "2030-01-01T00:00:00Z"},
		{"grant", "alice", "--extension", "argocd", "--access", "view", "-A", "--for", "2h", "--dry-run=maybe"},
	} {
		if _, err := run(bad...); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}
