package policy

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
)

var t0 = time.Date(2025, 6, 6, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) *metav1.Time { return &metav1.Time{Time: t0.Add(d)} }

func window(notBefore, expiresAt *metav1.Time) func(*oriav1alpha1.RBACPolicySpec) {
	return func(s *oriav1alpha1.RBACPolicySpec) { s.NotBefore, s.ExpiresAt = notBefore, expiresAt }
}

// TestCompileWindow: the compiled instance carries the policy's window, in
// whole seconds and never wider (so that it reads back as written).
func TestCompileWindow(t *testing.T) {
	half := 500 * time.Millisecond
	for _, tc := range []struct {
		name   string
		policy *oriav1alpha1.RBACPolicy
		want   binding.Window
	}{
		{"no window", policy(oriav1alpha1.AccessView), binding.Window{}},
		{"both bounds", policy(oriav1alpha1.AccessView, window(at(0), at(2*time.Hour))), binding.Window{NotBefore: at(0), ExpiresAt: at(2 * time.Hour)}},
		{"an end only", policy(oriav1alpha1.AccessView, window(nil, at(time.Hour))), binding.Window{ExpiresAt: at(time.Hour)}},
		{"fractions: the start rounded up, the end down", policy(oriav1alpha1.AccessView, window(at(half), at(time.Hour+half))),
			binding.Window{NotBefore: at(time.Second), ExpiresAt: at(time.Hour)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Compile(tc.policy, crds)
			if d := cmp.Diff(tc.want, binding.InstanceWindow(c.Instance.Spec)); d != "" {
				t.Errorf("instance window (-want +got):\n%s", d)
			}
		})
	}
}

// TestNarrowWindow: a policy with a spec error keeps the window both the
// grant in force and the current spec allow: an earlier expiresAt lands, a
// later one waits for a valid spec.
func TestNarrowWindow(t *testing.T) {
	bad := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "bot"} // no namespace: a spec error
	for _, tc := range []struct {
		name          string
		before, after func(*oriav1alpha1.RBACPolicySpec)
		want          binding.Window
	}{
		{"expiresAt moved earlier: lands", window(nil, at(2*time.Hour)), window(nil, at(time.Hour)), binding.Window{ExpiresAt: at(time.Hour)}},
		{"expiresAt moved later: the one in force stays", window(nil, at(time.Hour)), window(nil, at(2*time.Hour)), binding.Window{ExpiresAt: at(time.Hour)}},
		{"expiresAt removed: the one in force stays", window(nil, at(time.Hour)), window(nil, nil), binding.Window{ExpiresAt: at(time.Hour)}},
		{"expiresAt added: lands", window(nil, nil), window(nil, at(time.Hour)), binding.Window{ExpiresAt: at(time.Hour)}},
		{"notBefore moved later: lands", window(at(0), nil), window(at(time.Hour), nil), binding.Window{NotBefore: at(time.Hour)}},
		{"notBefore removed: the one in force stays", window(at(time.Hour), nil), window(nil, nil), binding.Window{NotBefore: at(time.Hour)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := Compile(policy(oriav1alpha1.AccessView, tc.before), crds)
			cur := policy(oriav1alpha1.AccessView, tc.after, func(s *oriav1alpha1.RBACPolicySpec) { s.Subjects = append(s.Subjects, bad) })
			c := Compile(cur, crds)
			got := Narrow(cur, c.Roles, old.Template, old.Instance)
			if got.Instance == nil {
				t.Fatal("nothing kept")
			}
			if d := cmp.Diff(tc.want, binding.InstanceWindow(got.Instance.Spec)); d != "" {
				t.Errorf("kept window (-want +got):\n%s", d)
			}
		})
	}
}
