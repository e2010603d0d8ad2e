package cli

import (
	"time"

	"testing"

	"github.com/google/go-cmp/cmp"
	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/record"
)

func crd(ext, group, plural, kind string, scope apiextensionsv1.ResourceScope) apiextensionsv1.CustomResourceDefinition {
	return apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group, Labels: map[string]string{
			oriav1alpha1.LabelOLMOwnerKind: oriav1alpha1.OLMOwnerKindClusterExtension, oriav1alpha1.LabelOLMOwnerName: ext,
		}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: group, Scope: scope,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind}},
	}
}

func extension(name, mode string, cond *metav1.Condition) ocv1.ClusterExtension {
	ce := ocv1.ClusterExtension{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if mode != "" {
		ce.Annotations = map[string]string{oriav1alpha1.AnnotationRBACMode: mode}
	}
	if cond != nil {
		ce.Status.Conditions = []metav1.Condition{*cond}
	}
	return ce
}

func clusterRole(name string, labels map[string]string, rules ...rbacv1.PolicyRule) rbacv1.ClusterRole {
	return rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Rules: rules}
}

func TestStatus(t *testing.T) {
	generated := func(ext string, extra map[string]string) map[string]string {
		l := map[string]string{oriav1alpha1.LabelManaged: oriav1alpha1.ManagedValue, oriav1alpha1.LabelExtension: ext}
		for k, v := range extra {
			l[k] = v
		}
		return l
	}
	bundle := map[string]string{oriav1alpha1.LabelOLMOwnerKind: oriav1alpha1.OLMOwnerKindClusterExtension, oriav1alpha1.LabelOLMOwnerName: "db"}
	s := &Snapshot{
		Extensions: []ocv1.ClusterExtension{
			extension("argocd", "Legacy", &metav1.Condition{Type: oriav1alpha1.TypeRBACManaged, Status: metav1.ConditionTrue, Reason: "Legacy"}),
			extension("db", "FineGrained", &metav1.Condition{Type: oriav1alpha1.TypeRBACManaged, Status: metav1.ConditionFalse, Reason: "Conflict", Message: "m"}),
			extension("plain", "", &metav1.Condition{Type: oriav1alpha1.TypeRBACManaged, Status: metav1.ConditionFalse, Reason: "Unmanaged"}),
		},
		CRDs: []apiextensionsv1.CustomResourceDefinition{
			crd("argocd", "argoproj.io", "applications", "Application", apiextensionsv1.NamespaceScoped),
			crd("db", "db.io", "clusters", "Cluster", apiextensionsv1.ClusterScoped),
			crd("plain", "plain.io", "things", "Thing", apiextensionsv1.NamespaceScoped),
		},
		ClusterRoles: []rbacv1.ClusterRole{
			clusterRole("applications.argoproj.io-admin", generated("argocd", map[string]string{oriav1alpha1.LabelAggregateToAdmin: "true"})),
			clusterRole("applications.argoproj.io-edit", generated("argocd", map[string]string{oriav1alpha1.LabelAggregateToEdit: "true"})),
			clusterRole("applications.argoproj.io-view", generated("argocd", map[string]string{oriav1alpha1.LabelAggregateToView: "true"})),
			clusterRole("applications.argoproj.io-view-crdview", generated("argocd", map[string]string{oriav1alpha1.LabelAggregateToView: "true"})),
			clusterRole("clusters.db.io-admin", bundle),
			clusterRole("clusters.db.io-edit", nil),
			clusterRole("clusters.db.io-view", generated("db", nil)),
		},
		Policies: []oriav1alpha1.RBACPolicy{
			{ObjectMeta: metav1.ObjectMeta{Name: "db-ops"}, Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: "db", Access: oriav1alpha1.AccessView},
				Status: oriav1alpha1.RBACPolicyStatus{Scope: oriav1alpha1.ScopeCluster, ScopeInstanceName: "rbacpolicy-db-ops",
					Conditions: []metav1.Condition{{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionTrue, Reason: "Bound"}}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: "argocd-2"}},
		},
		Templates: []oriav1alpha1.ScopeTemplate{
			{ObjectMeta: metav1.ObjectMeta{Name: "readers"}, Spec: oriav1alpha1.ScopeTemplateSpec{ClusterRoles: []oriav1alpha1.ClusterRoleTemplate{
				{Name: "applications.argoproj.io-view"}, {Name: "applications.argoproj.io-view-crdview"}, {Name: "pods-reader"}}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "inline"}, Spec: oriav1alpha1.ScopeTemplateSpec{ClusterRoles: []oriav1alpha1.ClusterRoleTemplate{
				{Name: "applications.argoproj.io-edit", Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}}}}}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "rbacpolicy-db-ops", OwnerReferences: []metav1.OwnerReference{ownership.Ref(ownership.KindRBACPolicy, "db-ops", "u")}},
				Spec: oriav1alpha1.ScopeTemplateSpec{ClusterRoles: []oriav1alpha1.ClusterRoleTemplate{{Name: "clusters.db.io-view"}}}},
		},
		Instances: []oriav1alpha1.ScopeInstance{
			{ObjectMeta: metav1.ObjectMeta{Name: "team-readers"}, Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: "readers"},
				Status: oriav1alpha1.ScopeInstanceStatus{Scope: oriav1alpha1.ScopeCluster,
					Conditions: []metav1.Condition{{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionTrue, Reason: "Bound"}}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "inline-1"}, Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: "inline"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "rbacpolicy-db-ops"}, Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: "rbacpolicy-db-ops"}, Status: oriav1alpha1.ScopeInstanceStatus{Scope: "Namespaces",
				BoundNamespaces: []string{"a", "b", "c", "d"}, BoundNamespaceCount: 4,
				Conditions: []metav1.Condition{{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionFalse, Reason: "NamespaceNotFound"}}}},
		},
	}
	got, err := Status(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []ExtensionStatus{
		{Name: "argocd", Mode: "Legacy", RBACManaged: "True", Reason: "Legacy",
			APIs: []API{{CRD: "applications.argoproj.io", Group: "argoproj.io", Resource: "applications", Kind: "Application", Scope: ScopeNamespaced}},
			Roles: []Role{
				{Name: "applications.argoproj.io-admin", API: "applications.argoproj.io", Source: SourceGenerated, AggregatesTo: []string{"admin"}},
				{Name: "applications.argoproj.io-edit", API: "applications.argoproj.io", Source: SourceGenerated, AggregatesTo: []string{"edit"}},
				{Name: "applications.argoproj.io-view", API: "applications.argoproj.io", Source: SourceGenerated, AggregatesTo: []string{"view"}},
				{Name: "applications.argoproj.io-view-crdview", API: "applications.argoproj.io", Source: SourceGenerated, AggregatesTo: []string{"view"}},
			},
			Grants: []Grant{{Kind: ownership.KindScopeInstance, Name: "team-readers", Access: "view+view-crdview", Where: "cluster-wide", Ready: "True", Reason: "Bound"}}},
		// A policy naming an extension that does not exist: reported, with
		// what it binds (nothing).
		{Name: "argocd-2", NotFound: true, Mode: "none", RBACManaged: "Unknown", Reason: "NotFound",
			Message: `ClusterExtension "argocd-2" does not exist: the RBACPolicies naming it grant nothing until it is installed`,
			Grants:  []Grant{{Kind: "RBACPolicy", Name: "other", Where: NothingBound, Ready: "Unknown", Reason: "NotReported"}}},
		{Name: "db", Mode: "FineGrained", RBACManaged: "False", Reason: "Conflict", Message: "m",
			APIs: []API{{CRD: "clusters.db.io", Group: "db.io", Resource: "clusters", Kind: "Cluster", Scope: ScopeCluster}},
			Roles: []Role{
				{Name: "clusters.db.io-admin", API: "clusters.db.io", Source: SourceBundle},
				{Name: "clusters.db.io-edit", API: "clusters.db.io", Source: SourceConflict},
				{Name: "clusters.db.io-view", API: "clusters.db.io", Source: SourceGenerated},
				{Name: "clusters.db.io-view-crdview", API: "clusters.db.io", Source: SourceMissing},
			},
			Grants: []Grant{
				{Kind: "RBACPolicy", Name: "db-ops", Access: "view", Where: "cluster-wide", Ready: "True", Reason: "Bound"},
				{Kind: ownership.KindScopeInstance, Name: "rbacpolicy-db-ops", Access: "view", Where: "in 4 namespaces: a, b, c, ...", Ready: "False", Reason: "NamespaceNotFound"},
			}},
		{Name: "plain", Mode: "Unmanaged", ModeFromDefault: true, RBACManaged: "False", Reason: "Unmanaged",
			APIs: []API{{CRD: "things.plain.io", Group: "plain.io", Resource: "things", Kind: "Thing", Scope: ScopeNamespaced}}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Status (-want +got):\n%s", d)
	}

	if _, err := Status(s, "nope"); err == nil {
		t.Error("Status of a missing extension: no error")
	}
	for _, name := range []string{"plain", "argocd-2"} {
		one, err := Status(s, name)
		if err != nil || len(one) != 1 || one[0].Name != name {
			t.Errorf("Status(%s) = %v, %v", name, one, err)
		}
	}
}

func TestStatusTable(t *testing.T) {
	table := StatusTable([]ExtensionStatus{{Name: "db", Mode: "Unmanaged", ModeFromDefault: true, RBACManaged: "False", Reason: "Unmanaged",
		APIs:  []API{{CRD: "clusters.db.io", Scope: ScopeCluster}},
		Roles: []Role{{Name: "clusters.db.io-edit", Source: SourceConflict}},
		Grants: []Grant{{Kind: "RBACPolicy", Name: "p", Access: "view", Where: "cluster-wide", Ready: "True", Reason: "Bound", Subjects: []string{"Group devs"},
			Window:  &GrantWindow{State: WindowActive, TimeLeft: "2h", Description: "until 2025-06-06T18:00:00Z (2h left)"},
			Granted: &record.Record{By: "admin", At: "2025-06-06T16:00:00Z", Reason: "INC-1"}, Revoked: &record.Record{By: "bob", At: "2025-06-06T17:00:00Z"}}},
	}, {Name: "gone", NotFound: true, Mode: "none", RBACManaged: "Unknown", Reason: "NotFound",
		Grants: []Grant{{Kind: "RBACPolicy", Name: "q", Access: "edit", Where: NothingBound, Ready: "False", Reason: "ExtensionNotFound"}},
	}})
	var got [][]any
	for _, r := range table.Rows {
		got = append(got, r.Cells)
	}
	want := [][]any{
		{"db", "Unmanaged (default)", "ClusterExtension", "db", "1 API", "RBACManaged=False Unmanaged", "", "", ""},
		{"db", "Unmanaged (default)", "API", "clusters.db.io", "Cluster", "", "", "", ""},
		{"db", "Unmanaged (default)", "ClusterRole", "clusters.db.io-edit", "conflict", "Conflict", "", "", ""},
		{"db", "Unmanaged (default)", "RBACPolicy", "p", "view cluster-wide", "Ready=True Bound", "until 2025-06-06T18:00:00Z (2h left)",
			`granted by "admin" at 2025-06-06T16:00:00Z: INC-1; revoked by "bob" at 2025-06-06T17:00:00Z`, "Group devs"},
		{"gone", "none", "ClusterExtension", "gone", "not installed", "NotFound", "", "", ""},
		{"gone", "none", "RBACPolicy", "q", "edit (nothing bound)", "Ready=False ExtensionNotFound", "", "", ""},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("StatusTable (-want +got):\n%s", d)
	}
}

// TestStatusInvalidMode: a typo in the mode annotation is shown as such,
// not as a mode.
func TestStatusInvalidMode(t *testing.T) {
	s := &Snapshot{Extensions: []ocv1.ClusterExtension{
		extension("argocd", "legacy", &metav1.Condition{Type: oriav1alpha1.TypeRBACManaged, Status: metav1.ConditionFalse, Reason: "InvalidMode"}),
	}}
	report, err := Status(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(report) != 1 || report[0].Mode != `invalid "legacy"` {
		t.Errorf("report %+v, want mode invalid \"legacy\"", report)
	}
}

// TestWhere: where a grant holds, as the status table says it; a grant that
// has bound nothing (invalid, waiting, revoked) does not read as a grant
// "in no namespace".
func TestWhere(t *testing.T) {
	for _, tc := range []struct {
		scope string
		bound []string
		want  string
	}{
		{oriav1alpha1.ScopeCluster, nil, "cluster-wide"},
		{"", nil, NothingBound},
		{oriav1alpha1.ScopeNamespaces, nil, "in no namespace"},
		{oriav1alpha1.ScopeNamespaces, []string{"a"}, "in 1 namespace: a"},
		{oriav1alpha1.ScopeNamespaces, []string{"a", "b"}, "in 2 namespaces: a, b"},
		{oriav1alpha1.ScopeNamespaces, []string{"a", "b", "c", "d"}, "in 4 namespaces: a, b, c, ..."},
	} {
		if got := where(tc.scope, tc.bound, int32(len(tc.bound))); got != tc.want {
			t.Errorf("where(%q, %v) = %q, want %q", tc.scope, tc.bound, got, tc.want)
		}
	}
}

// TestHideEnded: a grant that expired more than the kept time ago is left
// out, with the instance compiled from it; a recent one, an active one and
// one without a window stay.
func TestHideEnded(t *testing.T) {
	now := time.Date(2025, 6, 6, 12, 0, 0, 0, time.UTC)
	ended := func(ago time.Duration) *GrantWindow {
		return &GrantWindow{State: WindowExpired, ExpiresAt: &metav1.Time{Time: now.Add(-ago)}}
	}
	report := []ExtensionStatus{{Name: "argocd", Grants: []Grant{
		{Kind: "RBACPolicy", Name: "old", Window: ended(25 * time.Hour)},
		{Kind: "ScopeInstance", Name: "rbacpolicy-old", Window: ended(25 * time.Hour)},
		{Kind: "RBACPolicy", Name: "recent", Window: ended(time.Hour)},
		{Kind: "ScopeInstance", Name: "rbacpolicy-recent", Window: ended(time.Hour)},
		{Kind: "RBACPolicy", Name: "standing"},
		{Kind: "ScopeInstance", Name: "own-old", Window: ended(48 * time.Hour)},
		{Kind: "RBACPolicy", Name: "active", Window: &GrantWindow{State: WindowActive}},
	}}}
	if n := HideEnded(report, now, EndedKept); n != 2 {
		t.Errorf("HideEnded = %d, want 2", n)
	}
	var names []string
	for _, g := range report[0].Grants {
		names = append(names, g.Name)
	}
	if d := cmp.Diff([]string{"recent", "rbacpolicy-recent", "standing", "active"}, names); d != "" {
		t.Errorf("kept (-want +got):\n%s", d)
	}
}
