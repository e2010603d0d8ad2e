package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/ownership"
)

// windowNow is the instant the window tests judge at.
var windowNow = time.Date(2025, 6, 6, 16, 0, 0, 0, time.UTC)

func at(d time.Duration) *metav1.Time { return &metav1.Time{Time: windowNow.Add(d)} }

func TestWindowOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    binding.Window
		want *GrantWindow
	}{
		{"none", binding.Window{}, nil},
		{"active with an end", binding.Window{ExpiresAt: at(2 * time.Hour)},
			&GrantWindow{ExpiresAt: at(2 * time.Hour), State: WindowActive, TimeLeft: "2h", Description: "until 2025-06-06T18:00:00Z (2h left)"}},
		{"active, started, no end", binding.Window{NotBefore: at(-time.Hour)},
			&GrantWindow{NotBefore: at(-time.Hour), State: WindowActive, Description: "from 2025-06-06T15:00:00Z, with no end"}},
		{"pending", binding.Window{NotBefore: at(3 * time.Hour), ExpiresAt: at(5 * time.Hour)},
			&GrantWindow{NotBefore: at(3 * time.Hour), ExpiresAt: at(5 * time.Hour), State: WindowPending, TimeLeft: "3h",
				Description: "from 2025-06-06T19:00:00Z (in 3h) until 2025-06-06T21:00:00Z"}},
		{"expired", binding.Window{ExpiresAt: at(-time.Minute)},
			&GrantWindow{ExpiresAt: at(-time.Minute), State: WindowExpired, Description: "expired at 2025-06-06T15:59:00Z"}},
		{"expired at this instant", binding.Window{ExpiresAt: at(0)},
			&GrantWindow{ExpiresAt: at(0), State: WindowExpired, Description: "expired at 2025-06-06T16:00:00Z"}},
		// A fraction is read as oria reads it: the end rounded down.
		{"a fraction", binding.Window{ExpiresAt: at(1500 * time.Millisecond)},
			&GrantWindow{ExpiresAt: at(time.Second), State: WindowActive, TimeLeft: "1s", Description: "until 2025-06-06T16:00:01Z (1s left)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, windowOf(tc.w, windowNow)); d != "" {
				t.Errorf("windowOf (-want +got):\n%s", d)
			}
		})
	}
}

func TestViaNote(t *testing.T) {
	for _, tc := range []struct {
		w    binding.Window
		want string
	}{
		{binding.Window{}, ""},
		{binding.Window{NotBefore: at(-time.Hour)}, ""},
		{binding.Window{ExpiresAt: at(90 * time.Minute)}, " (until 2025-06-06T17:30:00Z (90m left))"},
		{binding.Window{ExpiresAt: at(-time.Second)}, " (expired at 2025-06-06T15:59:59Z: oria has not deleted its bindings yet)"},
		{binding.Window{NotBefore: at(time.Hour)}, " (pending, from 2025-06-06T17:00:00Z (in 60m), with no end: oria has not deleted its bindings yet)"},
	} {
		if got := viaNote(windowOf(tc.w, windowNow)); got != tc.want {
			t.Errorf("viaNote(%+v) = %q, want %q", tc.w, got, tc.want)
		}
	}
}

// windowSnapshot is argocd (FineGrained, one API) with the policy "temp"
// (edit for alice in team-a until 2h from windowNow), its compiled
// instance and binding, the pending policy "later", and an own instance
// "expired-own" whose window has passed but whose binding is still there.
func windowSnapshot() *Snapshot {
	managed := map[string]string{oriav1alpha1.LabelManaged: oriav1alpha1.ManagedValue}
	oriaRB := func(instance, name, role string, subj rbacv1.Subject) rbacv1.RoleBinding {
		rb := roleBinding("team-a", name, role, subj)
		rb.Labels = managed
		rb.OwnerReferences = []metav1.OwnerReference{ownership.Ref(ownership.KindScopeInstance, instance, types.UID("uid-"+instance))}
		return rb
	}
	compiled := func(policy string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "rbacpolicy-" + policy, OwnerReferences: []metav1.OwnerReference{ownership.Ref(ownership.KindRBACPolicy, policy, types.UID("uid-"+policy))}}
	}
	bob := rbacv1.Subject{Kind: rbacv1.UserKind, Name: "bob"}
	return &Snapshot{
		Now:        windowNow,
		Extensions: []ocv1.ClusterExtension{extension("argocd", "FineGrained", nil)},
		CRDs:       []apiextensionsv1.CustomResourceDefinition{crd("argocd", "argoproj.io", "applications", "Application", apiextensionsv1.NamespaceScoped)},
		ClusterRoles: []rbacv1.ClusterRole{
			clusterRole("applications.argoproj.io-edit", nil, rule("argoproj.io", "applications", "create")),
			clusterRole("applications.argoproj.io-view", nil, rule("argoproj.io", "applications", "get", "list", "watch")),
		},
		RoleBindings: []rbacv1.RoleBinding{
			oriaRB("rbacpolicy-temp", "temp-edit", "applications.argoproj.io-edit", alice),
			oriaRB("expired-own", "own-view", "applications.argoproj.io-view", bob),
			roleBinding("team-a", "alice-view", "applications.argoproj.io-view", alice),
		},
		Policies: []oriav1alpha1.RBACPolicy{
			{ObjectMeta: metav1.ObjectMeta{Name: "temp"}, Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: "argocd", Access: oriav1alpha1.AccessEdit,
				Subjects: []rbacv1.Subject{alice}, Namespaces: []string{"team-a"}, ExpiresAt: at(2 * time.Hour)},
				Status: oriav1alpha1.RBACPolicyStatus{ScopeInstanceName: "rbacpolicy-temp"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "later"}, Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: "argocd", Access: oriav1alpha1.AccessView,
				Subjects: []rbacv1.Subject{bob}, Namespaces: []string{"team-a"}, NotBefore: at(time.Hour), ExpiresAt: at(3 * time.Hour)},
				Status: oriav1alpha1.RBACPolicyStatus{ScopeInstanceName: "rbacpolicy-later"}},
		},
		Templates: []oriav1alpha1.ScopeTemplate{{ObjectMeta: metav1.ObjectMeta{Name: "own"}, Spec: oriav1alpha1.ScopeTemplateSpec{
			ClusterRoles:    []oriav1alpha1.ClusterRoleTemplate{{Name: "applications.argoproj.io-view"}},
			BindingTemplate: oriav1alpha1.BindingTemplate{Subjects: []rbacv1.Subject{bob}}}}},
		Instances: []oriav1alpha1.ScopeInstance{
			{ObjectMeta: compiled("temp"), Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: "rbacpolicy-temp", ExpiresAt: at(2 * time.Hour)}},
			{ObjectMeta: compiled("later"), Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: "rbacpolicy-later", NotBefore: at(time.Hour), ExpiresAt: at(3 * time.Hour)}},
			{ObjectMeta: metav1.ObjectMeta{Name: "expired-own"}, Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: "own", ExpiresAt: at(-time.Minute)}},
		},
	}
}

// TestStatusWindows: status shows each grant's window and the time left,
// the compiled instance's too.
func TestStatusWindows(t *testing.T) {
	report, err := Status(windowSnapshot(), "argocd")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range report[0].Grants {
		got = append(got, g.Kind+" "+g.Name+": "+g.Window.String())
	}
	want := []string{
		"RBACPolicy later: from 2025-06-06T17:00:00Z (in 60m) until 2025-06-06T19:00:00Z",
		"ScopeInstance rbacpolicy-later: from 2025-06-06T17:00:00Z (in 60m) until 2025-06-06T19:00:00Z",
		"RBACPolicy temp: until 2025-06-06T18:00:00Z (2h left)",
		"ScopeInstance rbacpolicy-temp: until 2025-06-06T18:00:00Z (2h left)",
		"ScopeInstance expired-own: expired at 2025-06-06T15:59:00Z",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("grants (-want +got):\n%s", d)
	}
	pending := pendingGrants(report[0].Grants)
	if len(pending) != 1 || pending[0].Name != "later" {
		t.Fatalf("pendingGrants = %+v, want the policy later alone", pending)
	}
	note := PendingNote(pending)
	for _, part := range []string{"Pending (not in force yet", "RBACPolicy later: view for User bob, from 2025-06-06T17:00:00Z (in 60m) until"} {
		if !strings.Contains(note, part) {
			t.Errorf("PendingNote = %q, want %q in it", note, part)
		}
	}
	if PendingNote(nil) != "" {
		t.Error("PendingNote of nothing is not empty")
	}
}

// TestAccessWindows: a row through a time-bound grant says until when,
// and ends then when every via does; a binding still in place after its
// grant expired is shown (it is in force), saying so.
func TestAccessWindows(t *testing.T) {
	s := windowSnapshot()
	apis := ExtensionAPIs(s.CRDs, "argocd")
	az := fakeAuthorizer{}
	grant(az, alice, "team-a", "applications", "get", "list", "watch", "create")
	grant(az, rbacv1.Subject{Kind: rbacv1.UserKind, Name: "bob"}, "team-a", "applications", "get", "list", "watch")
	rows, err := Confirm(context.Background(), az, Candidates(s, apis, ""), apis, "")
	if err != nil {
		t.Fatal(err)
	}
	byVia := map[string]*metav1.Time{}
	for _, r := range rows {
		for _, v := range r.Via {
			byVia[r.Subject+" | "+v] = r.ExpiresAt
		}
	}
	want := map[string]*metav1.Time{
		"User alice | RBACPolicy temp (until 2025-06-06T18:00:00Z (2h left))":                                           nil, // alice also holds view by hand: no end
		"User alice | RoleBinding team-a/alice-view -> ClusterRole applications.argoproj.io-view":                       nil,
		"User bob | ScopeInstance expired-own (expired at 2025-06-06T15:59:00Z: oria has not deleted its bindings yet)": at(-time.Minute),
	}
	if d := cmp.Diff(want, byVia); d != "" {
		t.Errorf("rows by via (-want +got):\n%s", d)
	}

	// Without the binding made by hand, alice's access ends with the grant.
	s.RoleBindings = s.RoleBindings[:2]
	rows, err = Confirm(context.Background(), az, Candidates(s, apis, ""), apis, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Subject == "User alice" && !r.ExpiresAt.Equal(at(2*time.Hour)) {
			t.Errorf("alice's row ends at %v, want %v", r.ExpiresAt, at(2*time.Hour))
		}
	}
}

// TestPlanWindows: plan judges the window: an instance outside it binds
// nothing now (its bindings go), and says so; inside it, plan says until
// when.
func TestPlanWindows(t *testing.T) {
	for _, tc := range []struct {
		name    string
		window  binding.Window
		changes []string
		note    string
	}{
		{"open, with an end", binding.Window{ExpiresAt: at(time.Hour)}, []string{"create RoleBinding c/ops-ops-pods-3254ffa37e ops-pods Group ops", "create RoleBinding c/ops-view-a104890d2f view Group ops"},
			"ScopeInstance ops is time-bound: it grants until 2025-06-06T17:00:00Z (60m left); oria deletes its bindings then"},
		{"pending", binding.Window{NotBefore: at(time.Hour)}, deletions(),
			"ScopeInstance ops is time-bound and pending, from 2025-06-06T17:00:00Z (in 60m), with no end: it grants nothing before spec.notBefore"},
		{"expired", binding.Window{ExpiresAt: at(-time.Hour)}, deletions(),
			"ScopeInstance ops expired at 2025-06-06T15:00:00Z (spec.expiresAt): it grants nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _, si := planState()
			st.Now = windowNow
			changed := si.DeepCopy()
			changed.Spec.Namespaces = []string{"a", "b", "c"}
			changed.Spec.NotBefore, changed.Spec.ExpiresAt = tc.window.NotBefore, tc.window.ExpiresAt
			report := Plan(st, []client.Object{changed}, nil)
			if d := cmp.Diff(tc.changes, changeLines(report)); d != "" {
				t.Errorf("changes (-want +got):\n%s", d)
			}
			if !strings.Contains(strings.Join(report.Notes, "\n"), tc.note) {
				t.Errorf("notes %q, want %q in them", report.Notes, tc.note)
			}
			if summarized := len(report.Templates) == 1; summarized != (tc.name != "expired") {
				t.Errorf("what the instance binds is summarized (but when it expired): %+v", report.Templates)
			}
		})
	}
}

// deletions are the changes of planState's instance outside its window:
// its bindings in a and b go.
func deletions() []string {
	return []string{"delete RoleBinding a/ops-ops-pods-3254ffa37e ops-pods Group ops", "delete RoleBinding a/ops-view-a104890d2f view Group ops",
		"delete RoleBinding b/ops-ops-pods-3254ffa37e ops-pods Group ops", "delete RoleBinding b/ops-view-a104890d2f view Group ops"}
}
